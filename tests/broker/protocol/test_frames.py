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
    with pytest.raises(FrameError, match="request of 1025 bytes is larger than socket.request.max.bytes=1024"):
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
    assert encode_response(request, response) == bytes.fromhex(
        "00000013 00000007 0000 02 0012 0000 0004 00 00000000 00"
    )


def test_unknown_api_key_is_unsupported():
    with pytest.raises(UnsupportedRequest):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_truncated_body_raises():
    request = api_versions_request(3)
    with pytest.raises((UnsupportedRequest, ValueError, IndexError)):
        decode_request(request[:-3])


def test_hand_written_fetch_responses_match_kios_encoding_byte_for_byte():
    import random
    import uuid

    from kafka_spark.broker.protocol import codec
    from kafka_spark.broker.protocol.codec import Request
    from kafka_spark.broker.protocol.versions import SUPPORTED_VERSIONS, ApiKey

    rng = random.Random(5)
    low, high = SUPPORTED_VERSIONS[ApiKey.FETCH]
    for version in range(low, high + 1):
        for _ in range(20):
            response = {
                "throttle_time": rng.randrange(0, 100),
                "error_code": rng.choice([0, 70]),
                "session_id": 0,
                "responses": [
                    {
                        "topic": f"topic-{t}",
                        "topic_id": rng.choice([uuid.uuid4(), None]),
                        "partitions": [
                            {
                                "partition_index": p,
                                "error_code": rng.choice([0, 1, 3, 100]),
                                "high_watermark": rng.randrange(-1, 10**12),
                                "last_stable_offset": rng.randrange(-1, 10**12),
                                "log_start_offset": rng.randrange(-1, 10**6),
                                "aborted_transactions": [
                                    {"producer_id": rng.randrange(10**9), "first_offset": rng.randrange(10**9)}
                                    for _ in range(rng.randrange(3))
                                ],
                                "preferred_read_replica": -1,
                                "records": rng.randbytes(rng.choice([0, 10, 126, 127, 5000, 20000])),
                            }
                            for p in range(rng.randrange(0, 4))
                        ],
                    }
                    for t in range(rng.randrange(0, 3))
                ],
            }
            request = Request(ApiKey.FETCH, version, rng.randrange(2**31), "c", object())
            parts = codec.encode_response_parts(request, response)
            assert b"".join(parts) == codec._encode_with_kio(request, response), (version, response)


def _kio_produce_body(version, rng):
    """A random Produce body of ``version`` as kio's dataclasses, and its bytes by kio's writer."""
    import datetime
    import io
    import sys
    import uuid

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    cls = load_request_schema(0, version)
    schema = sys.modules[cls.__module__]
    topic = (
        {"topic_id": uuid.uuid4} if version >= 13 else {"name": lambda: rng.choice(["orders", "é-topic", "x" * 249])}
    )
    body = cls(
        transactional_id=rng.choice([None, "", "txn-ü", "t" * 300]),
        acks=rng.choice([-1, 0, 1]),
        timeout=datetime.timedelta(milliseconds=rng.randrange(0, 2**31)),
        topic_data=tuple(
            schema.TopicProduceData(
                **{key: make() for key, make in topic.items()},
                partition_data=tuple(
                    schema.PartitionProduceData(
                        index=rng.randrange(0, 2**31),
                        records=rng.choice([None, b"", rng.randbytes(rng.choice([1, 70, 9000]))]),
                    )
                    for _ in range(rng.randrange(0, 4))
                ),
            )
            for _ in range(rng.randrange(0, 3))
        ),
    )
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, body)
    return body, buffer.getvalue()


def _produce_fields(body):
    return (
        body.transactional_id,
        body.acks,
        body.timeout,
        [
            (
                getattr(topic, "name", None),
                getattr(topic, "topic_id", None),
                [(p.index, None if p.records is None else bytes(p.records)) for p in topic.partition_data],
            )
            for topic in body.topic_data
        ],
    )


def test_hand_read_produce_requests_match_kios_reader_field_for_field():
    import random

    from kafka_spark.broker.protocol.codec import _reader, _request_class
    from kafka_spark.broker.protocol.produce_request import VERSIONS, read_produce_request

    rng = random.Random(11)
    for version in VERSIONS:
        for _ in range(40):
            _, payload = _kio_produce_body(version, rng)
            framed = b"garbage" + payload  # read from an offset, as after a request header
            ours, our_size = read_produce_request(framed, 7, version)
            theirs, their_size = _reader(_request_class(0, version))(framed, 7)
            assert our_size == their_size == len(payload)
            assert _produce_fields(ours) == _produce_fields(theirs)


def test_hand_read_produce_records_are_views_of_the_frame_not_copies():
    import random

    from kafka_spark.broker.protocol.produce_request import read_produce_request

    rng = random.Random(3)
    for version in (7, 9, 13):  # classic, flexible, flexible with topic ids
        body = None
        while body is None or not any(p.records for t in body.topic_data for p in t.partition_data):
            body, payload = _kio_produce_body(version, rng)
        frame_buffer = bytearray(payload)
        ours, _ = read_produce_request(frame_buffer, 0, version)
        records = next(p.records for t in ours.topic_data for p in t.partition_data if p.records)
        assert isinstance(records, memoryview) and records.obj is frame_buffer


def test_truncated_or_lying_produce_requests_are_refused_like_kio():
    import random

    from kafka_spark.broker.protocol import decode_request
    from kafka_spark.broker.protocol.codec import _reader, _request_class

    rng = random.Random(7)
    for version in (7, 9, 13):
        header = struct.pack(">hhih", 0, version, 42, 1) + b"c" + (b"\0" if version >= 9 else b"")
        for _ in range(30):
            _, payload = _kio_produce_body(version, rng)
            cuts = sorted({rng.randrange(0, len(payload)) for _ in range(8)})
            for cut in cuts:  # every truncation is an error, never a short read
                with pytest.raises(UnsupportedRequest):
                    decode_request(header + payload[:cut])
                with pytest.raises(Exception):  # noqa: B017 whichever error the cut runs into
                    _reader(_request_class(0, version))(payload[:cut], 0)
    # an array count far beyond the frame is refused before anything is allocated for it
    header = struct.pack(">hhih", 0, 7, 42, 1) + b"c"
    lying = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(UnsupportedRequest, match="more than the frame holds"):
        decode_request(header + lying)
    flexible_lying = b"\0" + struct.pack(">hi", 1, 1000) + bytes([0xFF, 0xFF, 0xFF, 0x7F])
    with pytest.raises(UnsupportedRequest, match="more than the frame holds"):
        decode_request(struct.pack(">hhih", 0, 9, 42, 1) + b"c\0" + flexible_lying)


def test_a_large_frame_is_received_into_one_buffer_not_reused_while_it_is_held():
    """The socket writes a big request straight into the buffer its frame is a view of (no join),
    and later reads go elsewhere while that view is alive, so it stays intact."""
    decoder = FrameDecoder()
    big = bytes(range(256)) * 4096  # 1 MiB
    stream = frame(big) + frame(b"small-request") + frame(b"x" * 100)
    position, frames, targets = 0, [], set()
    while position < len(stream):
        target = decoder.get_buffer()
        assert len(target) > 0
        count = min(len(target), 100_000, len(stream) - position)
        target[:count] = stream[position : position + count]
        targets.add(id(target.obj))
        position += count
        frames += decoder.received(count)
    assert [bytes(f) for f in frames] == [big, b"small-request", b"x" * 100]
    # It ends in one buffer of its size (rounded up to the next 64 KiB): no join of pieces.
    assert len(big) + 4 <= len(frames[0].obj) < len(big) + 4 + FrameDecoder.CHUNK
    for _ in range(3):  # more traffic never lands in a buffer a frame was handed out of
        decoder.feed(frame(b"y" * 5000))
    assert bytes(frames[0]) == big and bytes(frames[1]) == b"small-request"


def test_buffers_are_reused_once_their_frames_are_dropped_and_held_frames_stay_intact():
    """A stream of large requests alternates between two buffers when each frame is dropped
    after use (as the produce path does); a frame someone keeps pins its buffer."""
    import random

    rng = random.Random(7)
    decoder = FrameDecoder()
    payloads = [bytes([i]) * rng.randrange(200_000, 900_000) for i in range(40)]
    stream = b"".join(frame(p) for p in payloads)
    buffers, kept, seen = {}, {}, 0  # buffers: id -> the buffer, kept alive so ids stay unique
    position = 0
    while position < len(stream):
        target = decoder.get_buffer()
        buffers[id(target.obj)] = target.obj
        count = min(len(target), rng.randrange(1, 300_000), len(stream) - position)
        target[:count] = stream[position : position + count]
        del target  # as asyncio drops its view after recv_into
        position += count
        for view in decoder.received(count):
            assert bytes(view) == payloads[seen]
            if seen % 10 == 3:
                kept[seen] = view  # held on to: its buffer must not be written again
            seen += 1
        view = None
    assert seen == len(payloads)
    assert all(bytes(view) == payloads[i] for i, view in kept.items())
    # 40 frames of up to 900 kB read in pieces: a few buffers, not one (or more) per frame.
    assert len(buffers) < 20, len(buffers)


def test_a_declared_size_costs_nothing_a_frame_grows_with_the_bytes_received():
    """A frame declaring 80 MiB holds a 64 KiB chunk after its first kilobyte, and at most GROWTH
    (2) times what has arrived after that, until it is whole."""
    decoder = FrameDecoder()
    declared = 80 * 1024 * 1024
    decoder.feed(struct.pack(">i", declared) + b"z" * 1000)
    assert len(decoder.get_buffer().obj) == FrameDecoder.CHUNK
    received = 1004
    for piece in (100_000, 1_000_000, 7_000_000):
        decoder.feed(b"z" * piece)
        received += piece
        assert decoder.buffered == received
        assert len(decoder.get_buffer().obj) <= FrameDecoder.GROWTH * received + FrameDecoder.CHUNK
    frames = decoder.feed(b"z" * (declared + 4 - received))
    assert len(frames) == 1 and len(frames[0]) == declared


def test_a_pool_that_is_exhausted_starves_the_decoder_until_its_memory_comes_back():
    """Buffers above the chunk come from the pool: once it is used up, a decoder needing a larger
    one is starved (no room to read into) and gets it when another decoder's buffers are freed."""
    import asyncio

    from kafka_spark.broker.memory_pool import MemoryPool

    loop = asyncio.new_event_loop()
    try:
        pool = MemoryPool(1024 * 1024, loop)
        first, second = FrameDecoder(pool=pool), FrameDecoder(pool=pool)
        first.feed(struct.pack(">i", 50_000_000) + b"a" * 600_000)  # grows to 1 MiB: the whole pool
        assert 1024 * 1024 <= pool.used < 2 * 1024 * 1024 and not first.starved
        second.feed(struct.pack(">i", 50_000_000) + b"b" * (FrameDecoder.CHUNK - 4))  # its chunk is full
        assert second.starved and not second.make_room() and pool.refusals >= 1
        woken = []
        pool.wait(1, lambda: woken.append(second.make_room()))
        first.release()  # the connection is gone: its buffers are freed, the pool wakes its waiters
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert woken == [True] and not second.starved
        assert pool.used == 2 * FrameDecoder.CHUNK  # what second holds now, and nothing of first
        second.release()
        assert pool.used == 0 and pool.peak >= 1024 * 1024
    finally:
        loop.close()


def test_a_frame_whose_bytes_wait_in_the_socket_gets_its_whole_buffer_after_the_first_chunk():
    """What the socket holds already has arrived: the frame moves once, to a buffer its size."""
    waiting = [0]
    decoder = FrameDecoder(pending=lambda: waiting[0])
    declared = 3 * 1024 * 1024
    data = struct.pack(">i", declared) + b"w" * declared
    target = decoder.get_buffer()
    target[:] = data[: len(target)]
    waiting[0] = len(data) - len(target)  # the rest is in the socket's receive queue
    assert decoder.received(len(target)) == []
    buffer = decoder.get_buffer().obj
    assert declared + 4 <= len(buffer) < declared + 4 + FrameDecoder.CHUNK
    (frame,) = decoder.feed(data[FrameDecoder.CHUNK :])
    assert frame.obj is buffer and len(frame) == declared


def test_a_connection_that_sent_a_large_frame_whole_gets_the_next_ones_buffer_at_once_while_memory_is_plentiful():
    """Once a 2 MiB frame has come whole, the next one is read straight into a buffer its size,
    with no copy (as a streaming producer's requests are); with the pool over half used it starts
    in a chunk and grows with its bytes again."""
    import asyncio

    from kafka_spark.broker.memory_pool import MemoryPool

    loop = asyncio.new_event_loop()
    try:
        size = 2 * 1024 * 1024
        for tight in (False, True):
            pool = MemoryPool(64 * size, loop)
            taken = pool.allocate(40 * size) if tight else None  # someone else holds over half the pool
            decoder = FrameDecoder(pool=pool)
            assert len(decoder.feed(frame(b"p" * size))) == 1
            current = decoder.get_buffer().obj
            if tight:
                assert len(current) == FrameDecoder.CHUNK
                decoder.feed(struct.pack(">i", size) + b"q" * (len(current) - 4))  # fills the chunk
                grown = len(decoder.get_buffer().obj)
                assert grown <= FrameDecoder.GROWTH * len(current) + FrameDecoder.CHUNK < size + 4
            else:
                assert len(current) >= size + 4
                (second,) = decoder.feed(frame(b"q" * size))
                assert second.obj is current and bytes(second) == b"q" * size  # read in place, not moved
            del taken
    finally:
        loop.close()


def test_a_connection_idle_after_a_huge_frame_holds_at_most_keep_bytes():
    """The buffer waiting for the next frame is sized for the largest frame sent whole only up
    to KEEP_BYTES: a connection that once sent a 17 MiB request does not hold 17 MiB while idle."""
    import asyncio

    from kafka_spark.broker.memory_pool import MemoryPool

    loop = asyncio.new_event_loop()
    try:
        decoder = FrameDecoder(pool=MemoryPool(256 * 1024 * 1024, loop))
        huge = FrameDecoder.KEEP_BYTES + 1024 * 1024
        assert len(decoder.feed(frame(b"h" * huge))) == 1
        assert FrameDecoder.CHUNK < len(decoder.get_buffer().obj) <= FrameDecoder.KEEP_BYTES
        (second,) = decoder.feed(frame(b"s" * huge))  # still received whole
        assert len(second) == huge
    finally:
        loop.close()


def test_frames_are_read_only():
    decoder = FrameDecoder()
    (view,) = decoder.feed(frame(b"request!"))
    assert view.readonly


def test_hand_written_produce_responses_match_kios_encoding_byte_for_byte():
    import datetime
    import random
    import uuid

    from kafka_spark.broker.protocol import codec
    from kafka_spark.broker.protocol.codec import Request
    from kafka_spark.broker.protocol.versions import SUPPORTED_VERSIONS, ApiKey

    rng = random.Random(9)
    low, high = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
    for version in range(low, high + 1):
        for _ in range(30):
            response = {
                "throttle_time": rng.randrange(0, 100),
                "responses": [
                    {
                        "name": rng.choice(["orders", "é-topic", "t" * 249]),
                        "topic_id": uuid.uuid4(),
                        "partition_responses": [
                            {
                                "index": rng.randrange(0, 2**31),
                                "error_code": rng.choice([0, 2, 3, 10, 47, 56, 87]),
                                "base_offset": rng.randrange(-1, 10**15),
                                "log_append_time": rng.choice([None, rng.randrange(0, 2**41)]),
                                "record_errors": [
                                    {
                                        "batch_index": rng.randrange(0, 10**6),
                                        "batch_index_error_message": rng.choice([None, "bad", "ü" * 200]),
                                    }
                                    for _ in range(rng.choice([0, 0, 1, 3]))
                                ],
                                "error_message": rng.choice([None, "One or more records have been rejected"]),
                                **({"log_start_offset": rng.randrange(-1, 10**12)} if rng.random() < 0.8 else {}),
                            }
                            for _ in range(rng.randrange(0, 4))
                        ],
                    }
                    for _ in range(rng.randrange(0, 3))
                ],
            }
            for t in response["responses"]:  # kio takes LogAppendTime as an aware datetime
                for p in t["partition_responses"]:
                    if p["log_append_time"] is not None:
                        p["log_append_time"] = datetime.datetime.fromtimestamp(
                            p["log_append_time"] / 1000, datetime.UTC
                        )
            request = Request(ApiKey.PRODUCE, version, rng.randrange(2**31), "c", object())
            parts = codec.encode_response_parts(request, response)
            assert len(parts) == 1 and parts[0] == codec._encode_with_kio(request, response), (version, response)


def test_a_starved_decoder_still_gives_a_read_room_when_asked():
    """asyncio may ask for a buffer once more before a paused connection stops reading: it gets
    room beyond the pool rather than an empty buffer (which would be a fatal error)."""
    import asyncio

    from kafka_spark.broker.memory_pool import MemoryPool

    loop = asyncio.new_event_loop()
    try:
        pool = MemoryPool(1, loop)  # exhausted by the first byte
        decoder = FrameDecoder(pool=pool)
        decoder.feed(struct.pack(">i", 10_000_000) + b"s" * (4 * FrameDecoder.CHUNK - 4))
        assert decoder.starved
        assert len(decoder.get_buffer()) > 0 and not decoder.starved
        assert decoder.buffered == 4 * FrameDecoder.CHUNK
    finally:
        loop.close()


def test_tagged_fields_a_producer_sends_are_skipped_wherever_they_stand():
    """KIP-482 lets any struct carry tagged fields; Produce defines none, so a reader must step over
    unknown ones (kio's writer never emits them, hence this hand-made v9 body)."""
    from kafka_spark.broker.protocol.produce_request import read_produce_request

    body = (
        b"\x00"
        + struct.pack(">hi", 1, 5000)  # null transactional id, acks, timeout
        + b"\x02"
        + b"\x02t"  # one topic, "t"
        + b"\x02"
        + struct.pack(">i", 3)
        + b"\x05abcd"  # one partition, index 3, 4 bytes of records
        + b"\x01\x05\x02\xaa\xbb"  # the partition's tags: tag 5, two bytes
        + b"\x00"  # the topic's (none)
        + b"\x02\x00\x01\xff\x07\x00"
    )  # the body's: tag 0 one byte, tag 7 empty
    request, size = read_produce_request(body, 0, 9)
    assert size == len(body)
    (topic,) = request.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index, bytes(partition.records), request.acks) == ("t", 3, b"abcd", 1)
