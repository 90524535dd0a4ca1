"""Kafka wire protocol, sans-I/O: frames in, requests out; responses in, bytes out.

Message layouts come from kio (dataclasses generated from Kafka's own JSON schemas, with a
native reader); measured here: parsing a 4 MB ProduceRequest v7 takes ~1.5 ms and encoding a
4 MB FetchResponse v11 ~0.4 ms, a small FetchResponse ~14 µs. Two exceptions, both about the
megabytes of records, which kio copies: Fetch responses v4-v11 are written by hand as parts
(codec.encode_response_parts), so that the record sets go to the socket as the log returned them
(tested byte for byte against kio's encoding); Produce requests v3-v8 are read by hand
(produce_request.py), leaving each record set in the received frame (tested field for field
against kio's reader).
"""

from kafka_spark.broker.protocol.codec import (
    Request,
    UnsupportedRequest,
    build,
    decode_request,
    encode_response,
    encode_response_parts,
)
from kafka_spark.broker.protocol.frames import FrameDecoder, FrameError, MAX_FRAME_BYTES
from kafka_spark.broker.protocol.versions import SUPPORTED_VERSIONS, ApiKey

__all__ = [
    "ApiKey",
    "FrameDecoder",
    "FrameError",
    "MAX_FRAME_BYTES",
    "Request",
    "SUPPORTED_VERSIONS",
    "UnsupportedRequest",
    "build",
    "decode_request",
    "encode_response",
    "encode_response_parts",
]
