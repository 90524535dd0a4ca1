"""Request decoding and response encoding on top of kio's generated message classes.

Handlers stay version-agnostic: they read request attributes by Kafka's field names and return
responses as plain nested dicts; :func:`build` turns a dict into the dataclass of the exact
version the client asked for, dropping fields that version lacks and applying Kafka's defaults
for the ones the handler left out.
"""

from __future__ import annotations

import datetime
import io
import struct
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.serial.errors import SerialError

from kafka_spark.broker.file_region import FileRegion, materialize
from kafka_spark.broker.protocol import fetch_response, produce_request, produce_response, schemas
from kafka_spark.broker.protocol.primitives import skip_tagged_fields
from kafka_spark.broker.protocol.versions import SASL_VERSIONS, SUPPORTED_VERSIONS, ApiKey

_HEADER = struct.Struct(">hhi")
#: Kafka's principal of an unauthenticated connection (PLAINTEXT, or SSL without a client certificate).
ANONYMOUS = "User:ANONYMOUS"
_I16 = struct.Struct(">h")


class UnsupportedRequest(ValueError):
    """A request this broker will not serve: an unknown API key or version (other than
    ApiVersions), or bytes that do not parse as the declared version. Kafka closes the
    connection in that case, and so do we."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request dataclass of this api_key/api_version, or None (see below)
    client_host: str = ""  # the peer address, as Kafka's DescribeGroups reports it
    principal: str = ANONYMOUS  # who sent it: User:NAME once SASL authenticated it (authorizer.py)

    @property
    def unsupported_api_versions(self) -> bool:
        """An ApiVersions request of a version we do not serve: answer error 35 with a v0 body."""
        return self.body is None


def decode_request(frame: bytes | memoryview, client_host: str = "", principal: str = ANONYMOUS) -> Request:
    """Decode one frame (without its size prefix).

    Raises UnsupportedRequest for unknown keys or versions, ValueError-family errors from kio
    (truncated or malformed bodies); the server closes the connection on any of them.
    """
    if len(frame) < 8:
        raise UnsupportedRequest("request shorter than its fixed header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    served = SUPPORTED_VERSIONS.get(api_key) or SASL_VERSIONS.get(api_key)  # the connection gates SASL
    if served is None:
        raise UnsupportedRequest(f"api key {api_key} is not served")
    # Header v1 and v2 both carry client_id as a classic (int16-length) nullable string.
    (client_id_len,) = _I16.unpack_from(frame, 8)
    position = 10
    client_id = None
    if client_id_len >= 0:
        client_id = bytes(frame[10 : 10 + client_id_len]).decode("utf-8", "replace")
        position += client_id_len
    if position > len(frame):
        raise UnsupportedRequest("request header truncated")
    low, high = served
    if not low <= api_version <= high:
        if api_key == ApiKey.API_VERSIONS:
            return Request(api_key, api_version, correlation_id, client_id, None, client_host, principal)
        raise UnsupportedRequest(f"api key {api_key} version {api_version} is not served")
    request_class = _request_class(api_key, api_version)
    try:
        if request_class.__flexible__:
            position = skip_tagged_fields(frame, position)  # request header v2
        if api_key == ApiKey.PRODUCE and api_version in produce_request.VERSIONS:
            body, size = produce_request.read_produce_request(frame, position, api_version)  # records not copied
        else:
            body, size = _reader(request_class)(frame, position)
    except (SerialError, ValueError, TypeError, OverflowError) as error:
        # kio's native reader raises its own errors and, for out-of-range values, ValueError.
        raise UnsupportedRequest(f"api key {api_key} v{api_version}: malformed body ({error})") from None
    # Bytes after the body are ignored, as Kafka ignores them: librdkafka 2.x sends three stray
    # zero bytes after the null topic array of an all-topics Metadata request from v9 on (the
    # unused rest of an int32 placeholder), which Kafka brokers never notice.
    return Request(api_key, api_version, correlation_id, client_id, body, client_host, principal)


def encode_response(request: Request, response: Any) -> bytes:
    """Frame a response (a kio dataclass, or a dict to :func:`build`) for ``request``."""
    return b"".join(map(materialize, encode_response_parts(request, response)))


def encode_response_parts(request: Request, response: Any) -> list[bytes | memoryview | FileRegion]:
    """:func:`encode_response` as parts to write in order. A Fetch response's record sets are
    parts of their own, exactly as the log returned them: the megabytes of a fetch are not copied
    into an encoding buffer first, and a FileRegion of a segment file is not read at all."""
    if isinstance(response, dict) and not request.unsupported_api_versions:
        if request.api_key == ApiKey.FETCH and request.api_version in fetch_response.VERSIONS:
            return fetch_response.encode(request.correlation_id, request.api_version, response)
        if request.api_key == ApiKey.PRODUCE and request.api_version in produce_response.VERSIONS:
            return [produce_response.encode(request.correlation_id, request.api_version, response)]
    return [_encode_with_kio(request, response)]


def _encode_with_kio(request: Request, response: Any) -> bytes:
    if request.unsupported_api_versions:
        return _unsupported_api_versions(request.correlation_id)
    response_class = _response_class(request.api_key, request.api_version)
    if isinstance(response, dict):
        response = build(response_class, response)
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(struct.pack(">i", request.correlation_id))
    # ApiVersions answers always use response header v0, even for flexible bodies (KIP-511).
    if response_class.__flexible__ and request.api_key != ApiKey.API_VERSIONS:
        buffer.write(b"\0")
    _writer(response_class)(buffer, response)
    size = buffer.tell() - 4
    buffer.seek(0)
    buffer.write(struct.pack(">i", size))
    return buffer.getvalue()


def _unsupported_api_versions(correlation_id: int) -> bytes:
    low, high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    body = struct.pack(">ihihhh", correlation_id, ErrorCode.unsupported_version, 1, ApiKey.API_VERSIONS, low, high)
    return struct.pack(">i", len(body)) + body


@cache
def _request_class(api_key: int, api_version: int) -> Any:
    return schemas.request_class(api_key, api_version)


@cache
def _response_class(api_key: int, api_version: int) -> Any:
    return schemas.response_class(api_key, api_version)


@cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


# --- dict -> versioned dataclass -------------------------------------------------------------


@cache
def _plan(cls: Any) -> tuple[tuple[str, str, Any, bool, bool], ...]:
    """Per field: (name, kind, nested class, optional, has_default)."""
    plan = []
    for f in fields(cls):
        kind_info = classify_field(f)
        kafka_type = f.metadata.get("kafka_type", "")
        if isinstance(kind_info, EntityTupleField):
            kind, nested = "entities", kind_info.type_
        elif isinstance(kind_info, EntityField):
            kind, nested = "entity", kind_info.type_
        elif kafka_type == "error_code":
            kind, nested = "error", None
        elif kafka_type.startswith("timedelta"):
            kind, nested = "timedelta", None
        else:
            kind, nested = "plain", None
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        optional = "None" in str(f.type)
        plan.append((f.name, kind, nested, optional, has_default))
    return tuple(plan)


def build(cls: Any, values: dict[str, Any]) -> Any:
    """Build ``cls`` from a dict, recursively. Unknown keys are ignored (they belong to other
    versions); missing keys take the schema default, else None for nullable fields, else 0/()."""
    kwargs: dict[str, Any] = {}
    for name, kind, nested, optional, has_default in _plan(cls):
        if name not in values:
            if has_default:
                continue
            if optional:
                kwargs[name] = None
                continue
            value: Any = () if kind == "entities" else 0
        else:
            value = values[name]
        if value is None:
            kwargs[name] = None
        elif kind == "entities":
            kwargs[name] = tuple(build(nested, item) for item in value)
        elif kind == "entity":
            kwargs[name] = build(nested, value)
        elif kind == "error":
            kwargs[name] = ErrorCode(int(value))
        elif kind == "timedelta":
            kwargs[name] = (
                value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=int(value))
            )
        else:
            kwargs[name] = value
    return cls(**kwargs)
