"""OffsetCommit (8), v2-7: validate the member, then store offsets durably.

Group-level failures (22 ILLEGAL_GENERATION, 25 UNKNOWN_MEMBER_ID, 27 REBALANCE_IN_PROGRESS) are
answered on every partition, as Kafka does; 3 UNKNOWN_TOPIC_OR_PARTITION and 12
OFFSET_METADATA_TOO_LARGE are per partition and do not stop the others from committing. The
response waits (without holding up the connection) for the fsync of ``__consumer_offsets``.
``retention_time_ms`` (v2-4) is ignored: offsets are kept until the group or topic is deleted.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable

from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.group_offsets import CommittedOffset
from kafka_spark.broker.groups import ErrorCode
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.groups")

_KAFKA_STORAGE_ERROR = 56


def handle(broker: Any, request: Any) -> Any:
    body = request.body
    coordinator = broker.groups
    group_error = coordinator.validate_offset_commit(body.group_id, body.generation_id_or_member_epoch, body.member_id)
    now = int(time.time() * 1000)
    codes: dict[TopicPartition, int] = {}
    accepted: dict[TopicPartition, CommittedOffset] = {}
    for topic in body.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            code = group_error
            if code is ErrorCode.NONE:
                code = coordinator.partition_error(tp, partition.committed_metadata)
            if code is ErrorCode.NONE:
                accepted[tp] = CommittedOffset(
                    partition.committed_offset, getattr(partition, "committed_leader_epoch", -1),
                    partition.committed_metadata or "", now)
            codes[tp] = int(code)
    durable: Awaitable[None] | None = None
    try:
        durable = coordinator.store_offsets(body.group_id, accepted)
    except StorageError as error:
        logger.error("group %s: storing offsets failed: %s", body.group_id, error)
        for tp in accepted:
            codes[tp] = _KAFKA_STORAGE_ERROR
    response = _response(body, codes)
    if durable is None:
        return response
    return Deferred(_after(durable, response, codes))


def _response(body: Any, codes: dict[TopicPartition, int]) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {"name": topic.name,
             "partitions": [{"partition_index": p.partition_index,
                             "error_code": codes[TopicPartition(topic.name, p.partition_index)]}
                            for p in topic.partitions]}
            for topic in body.topics
        ],
    }


async def _after(durable: Awaitable[None], response: dict[str, Any], codes: dict[TopicPartition, int]) -> dict[str, Any]:
    try:
        await durable
    except StorageError as error:
        logger.error("fsync of committed offsets failed: %s", error)
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"] == 0:
                    partition["error_code"] = _KAFKA_STORAGE_ERROR
    return response
