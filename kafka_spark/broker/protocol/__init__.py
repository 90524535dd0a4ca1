"""Kafka wire protocol, sans-I/O: frames in, requests out; responses in, bytes out.

Message layouts come from kio (dataclasses generated from Kafka's own JSON schemas, with a
native reader and writer), flexible versions (KIP-482) included; the few versions Kafka 4.4 added
after kio 0.6.5 are declared in kio's format in schemas.py. Measured here: parsing a 4 MB
ProduceRequest v7 takes ~1.5 ms and encoding a 4 MB FetchResponse v11 ~0.4 ms, a small
FetchResponse ~14 µs. Three exceptions, all on the hot path and written by hand: Fetch responses
(fetch_response.py), so that the record sets go to the socket as the log returned them; Produce
requests (produce_request.py), leaving each record set in the received frame; Produce responses
(produce_response.py), the most frequent response, cheaper built directly. Each is tested against
kio's encoding of every version it serves.
"""

from kafka_spark.broker.protocol.codec import (
    Request,
    UnsupportedRequest,
    build,
    decode_request,
    encode_response,
    encode_response_parts,
)
from kafka_spark.broker.protocol.frames import MAX_FRAME_BYTES, FrameDecoder, FrameError
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
