"""Message versions Apache Kafka 4.4 serves that kio 0.6.5 has no classes for, declared in kio's
own format (frozen dataclasses whose fields carry Kafka types in their metadata), so that kio's
readers and writers encode them like every other message.

From Kafka 4.4's JSON schemas (clients/src/main/resources/common/message/):

- ApiVersionsRequest v5 adds ``ClusterId`` (nullable string, default null) and ``NodeId`` (int32,
  default -1): the cluster and node the client means to reach. The response is v4's.
- DeleteGroupsRequest v3 is v2; the response adds ``ErrorMessage`` (nullable string) per group.
- TxnOffsetCommitRequest/Response v6 name topics by ``TopicId`` (uuid) instead of ``Name``.

Everything else comes from kio (``codec._request_class`` / ``_response_class`` look here first).
"""

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

from kafka_spark.broker.protocol.versions import ApiKey


def _meta(kafka_type: str) -> dict[str, str]:
    return {"kafka_type": kafka_type}


# -- ApiVersions v5 --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.API_VERSIONS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata=_meta("string"))
    client_software_version: str = field(metadata=_meta("string"))
    cluster_id: str | None = field(metadata=_meta("string"), default=None)
    node_id: i32 = field(metadata=_meta("int32"), default=i32(-1))


# -- DeleteGroups v3 -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.DELETE_GROUPS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    groups_names: tuple[str, ...] = field(metadata=_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResultV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.DELETE_GROUPS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    group_id: str = field(metadata=_meta("string"))
    error_code: ErrorCode = field(metadata=_meta("error_code"))
    error_message: str | None = field(metadata=_meta("string"), default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.DELETE_GROUPS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata=_meta("timedelta_i32"))
    results: tuple[DeletableGroupResultV3, ...]


# -- TxnOffsetCommit v6 ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestPartitionV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata=_meta("int32"))
    committed_offset: i64 = field(metadata=_meta("int64"))
    committed_leader_epoch: i32 = field(metadata=_meta("int32"), default=i32(-1))
    committed_metadata: str | None = field(metadata=_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestTopicV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata=_meta("uuid"))
    partitions: tuple[TxnOffsetCommitRequestPartitionV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestV6:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: str = field(metadata=_meta("string"))
    group_id: str = field(metadata=_meta("string"))
    producer_id: i64 = field(metadata=_meta("int64"))
    producer_epoch: i16 = field(metadata=_meta("int16"))
    generation_id: i32 = field(metadata=_meta("int32"), default=i32(-1))
    member_id: str = field(metadata=_meta("string"), default="")
    group_instance_id: str | None = field(metadata=_meta("string"), default=None)
    topics: tuple[TxnOffsetCommitRequestTopicV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponsePartitionV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata=_meta("int32"))
    error_code: ErrorCode = field(metadata=_meta("error_code"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseTopicV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata=_meta("uuid"))
    partitions: tuple[TxnOffsetCommitResponsePartitionV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseV6:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(ApiKey.TXN_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata=_meta("timedelta_i32"))
    topics: tuple[TxnOffsetCommitResponseTopicV6, ...]


REQUESTS: dict[tuple[int, int], Any] = {
    (ApiKey.API_VERSIONS, 5): ApiVersionsRequestV5,
    (ApiKey.DELETE_GROUPS, 3): DeleteGroupsRequestV3,
    (ApiKey.TXN_OFFSET_COMMIT, 6): TxnOffsetCommitRequestV6,
}

RESPONSES: dict[tuple[int, int], Any] = {
    (ApiKey.DELETE_GROUPS, 3): DeleteGroupsResponseV3,
    (ApiKey.TXN_OFFSET_COMMIT, 6): TxnOffsetCommitResponseV6,
}


def request_class(api_key: int, api_version: int) -> Any:
    return REQUESTS.get((api_key, api_version)) or load_request_schema(api_key, api_version)


def response_class(api_key: int, api_version: int) -> Any:
    if api_key == ApiKey.API_VERSIONS and api_version == 5:
        return load_response_schema(api_key, 4)  # v5's response is v4's
    return RESPONSES.get((api_key, api_version)) or load_response_schema(api_key, api_version)
