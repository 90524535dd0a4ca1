import struct

import pytest

from kafka_spark.broker.protocol import FrameDecoder, FrameError, decode_request, encode_response
from kafka_spark.broker.protocol.codec import UnsupportedRequest


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_reads_are_reassembled_in_order():
    payloads = [b"A" * 10, b"B" * 300, b"C" * 8]
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    seen = []
    for i in range(0, len(stream), 7):
        seen += decoder.feed(stream[i : i + 7])
    assert seen == payloads
    assert decoder.buffered == 0


def test_oversized_frame_is_rejected_before_buffering_it():
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameError, match="outside"):
        decoder.feed(struct.pack(">i", 1025))


def test_negative_or_tiny_frame_size_is_rejected():
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", -5))
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", 3) + b"abc")


def api_versions_request(version: int, correlation_id: int = 7) -> bytes:
    header = struct.pack(">hhi", 18, version, correlation_id) + struct.pack(">h", 3) + b"cli"
    if version >= 3:
        # header tag buffer, then client_software_name/version (compact strings) and tag buffer
        return header + b"\0" + b"\x04rdk" + b"\x032.\x00"[:0] + b"\x03v1" + b"\0"
    return header


def test_api_versions_v3_request_is_decoded():
    request = decode_request(api_versions_request(3))
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (18, 3, 7, "cli")
    assert request.body.client_software_name == "rdk"


def test_unsupported_api_versions_version_gets_error_35_with_a_v0_body():
    request = decode_request(api_versions_request(9))
    assert request.unsupported_api_versions
    data = encode_response(request, None)
    size, correlation_id, error, count, key, low, high = struct.unpack(">iihihhh", data)
    assert size == len(data) - 4
    assert (correlation_id, error, count, key, low) == (7, 35, 1, 18, 0)
    assert high >= 3


def test_api_versions_v3_response_header_has_no_tag_byte():
    request = decode_request(api_versions_request(3))
    response = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}], "throttle_time": 0}
    # The reference's byte-exact example (kafka-protocol-subset.md §2.5), correlation id 7 here.
    assert encode_response(request, response) == bytes.fromhex("00000013 00000007 0000 02 0012 0000 0004 00 00000000 00")


def test_unknown_api_key_is_unsupported():
    with pytest.raises(UnsupportedRequest):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_truncated_body_raises():
    request = api_versions_request(3)
    with pytest.raises((UnsupportedRequest, ValueError, IndexError)):
        decode_request(request[:-3])


def test_hand_written_fetch_responses_match_kios_encoding_byte_for_byte():
    import random

    from kafka_spark.broker.protocol import codec
    from kafka_spark.broker.protocol.codec import Request
    from kafka_spark.broker.protocol.versions import ApiKey

    rng = random.Random(5)
    for version in range(4, 12):
        for _ in range(20):
            response = {
                "throttle_time": rng.randrange(0, 100), "error_code": rng.choice([0, 70]), "session_id": 0,
                "responses": [
                    {"topic": f"topic-{t}", "partitions": [
                        {"partition_index": p, "error_code": rng.choice([0, 1, 3]),
                         "high_watermark": rng.randrange(-1, 10**12), "last_stable_offset": rng.randrange(-1, 10**12),
                         "log_start_offset": rng.randrange(-1, 10**6),
                         "aborted_transactions": [{"producer_id": rng.randrange(10**9), "first_offset": rng.randrange(10**9)}
                                                  for _ in range(rng.randrange(3))],
                         "preferred_read_replica": -1,
                         "records": rng.randbytes(rng.choice([0, 10, 5000, 20000]))}
                        for p in range(rng.randrange(0, 4))]}
                    for t in range(rng.randrange(0, 3))
                ],
            }
            request = Request(ApiKey.FETCH, version, rng.randrange(2**31), "c", object())
            parts = codec.encode_response_parts(request, response)
            assert b"".join(parts) == codec._encode_with_kio(request, response), (version, response)
