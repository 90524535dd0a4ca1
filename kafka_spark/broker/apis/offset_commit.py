"""OffsetCommit (8), v2-10: validate the member, then store offsets durably.

Group-level failures (22 ILLEGAL_GENERATION, 25 UNKNOWN_MEMBER_ID, 27 REBALANCE_IN_PROGRESS) are
answered on every partition, as Kafka does; 3 UNKNOWN_TOPIC_OR_PARTITION and 12
OFFSET_METADATA_TOO_LARGE are per partition and do not stop the others from committing. The
response waits (without holding up the connection) for the fsync of ``__consumer_offsets``.
``retention_time_ms`` (v2-4) is ignored: offsets are kept until the group or topic is deleted.
v10 names topics by id; an id no topic has is UNKNOWN_TOPIC_ID (100) on its partitions. With an
authorizer: READ on the group (30 on every partition) and on each topic (29 on its partitions).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.topic_ids import topic_name
from kafka_spark.broker.coordinator.group import write_error_code
from kafka_spark.broker.coordinator.group_offsets import CommittedOffset
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.coordinator.group")


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    coordinator = broker.groups
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        group_error: Any = ErrorCode.group_authorization_failed
    else:
        group_error = coordinator.validate_offset_commit(
            body.group_id,
            body.generation_id_or_member_epoch,
            body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            partitions=[
                (name, partition.partition_index)
                for topic in body.topics
                if (name := topic_name(broker, topic)) is not None
                for partition in topic.partitions
            ],
        )
    now = int(time.time() * 1000)
    response_topics = []
    accepted: dict[TopicPartition, tuple[CommittedOffset, dict[str, Any]]] = {}
    for topic in body.topics:
        name = topic_name(broker, topic)
        readable = access.allowed(broker, request, access.READ, access.TOPIC, name or "")
        entries = []
        for partition in topic.partitions:
            entry = {"partition_index": partition.partition_index, "error_code": int(group_error)}
            entries.append(entry)
            if group_error != ErrorCode.none:
                continue
            if not readable:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                continue
            if name is None:
                entry["error_code"] = ErrorCode.unknown_topic_id
                continue
            tp = TopicPartition(name, partition.partition_index)
            entry["error_code"] = int(coordinator.partition_error(tp, partition.committed_metadata))
            if entry["error_code"] == ErrorCode.none:
                accepted[tp] = (
                    CommittedOffset(
                        partition.committed_offset,
                        getattr(partition, "committed_leader_epoch", -1),
                        partition.committed_metadata or "",
                        now,
                    ),
                    entry,
                )
        response_topics.append({"name": name, "topic_id": getattr(topic, "topic_id", None), "partitions": entries})
    response = {"throttle_time": 0, "topics": response_topics}
    durable: Awaitable[None] | None = None
    try:
        durable = coordinator.store_offsets(body.group_id, {tp: offset for tp, (offset, _) in accepted.items()})
    except StorageError as error:
        logger.error("group %s: storing offsets failed: %s", body.group_id, error)
        for _, entry in accepted.values():
            entry["error_code"] = ErrorCode.kafka_storage_error
    if durable is None:
        return response
    return Deferred(_after(durable, response))


async def _after(durable: Awaitable[None], response: dict[str, Any]) -> dict[str, Any]:
    try:
        await durable
    except StorageError as error:
        code = write_error_code(error)  # NOT_COORDINATOR: a cluster's coordinator lost its partition
        level = logging.WARNING if code == ErrorCode.not_coordinator else logging.ERROR
        logger.log(level, "committed offsets not stored: %s", error)
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"] == ErrorCode.none:
                    partition["error_code"] = code
    return response
