"""TxnOffsetCommit (28), v0-6: consumer offsets staged in a transaction.

Sent to the group coordinator after AddOffsetsToTxn. A single node is both coordinators, so the
offsets are staged in the transaction coordinator and handed to the group coordinator
(``broker.groups.commit_offsets``) when the transaction commits; an abort drops them. On a cluster
(Kafka's way) the group's coordinator writes them to the group's partition of
``__consumer_offsets`` as transactional records of the producer, replicated before the answer, and
applies them when the transaction's COMMIT marker reaches that partition (AddOffsetsToTxn made it
a partition of the transaction). The one
error (49, 47, 48 without AddOffsetsToTxn) applies to every partition.

v3+ (KIP-447) may name the consumer's group membership (generation, member id, instance id): a
commit from a member that is not (or no longer) in the group's current generation is refused with
the group's error (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), so a zombie consumer
cannot commit for partitions reassigned elsewhere. v5+ is transaction protocol v2 (KIP-890): the
group joins the transaction without AddOffsetsToTxn. v6 names topics by id.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.topic_ids import topic_name
from kafka_spark.broker.coordinator.group import CoordinatorMovedError
from kafka_spark.broker.coordinator.group_offsets import CommittedOffset
from kafka_spark.broker.deferred import Deferred
from kafka_spark.common.topic_partition import TopicPartition


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    names = [topic_name(broker, topic) for topic in body.topics]
    offsets = {
        TopicPartition(name, partition.partition_index): (
            partition.committed_offset,
            partition.committed_metadata,
            getattr(partition, "committed_leader_epoch", -1),
        )
        for name, topic in zip(names, body.topics, strict=True)
        if name is not None
        for partition in topic.partitions
    }
    generation_id, member_id = getattr(body, "generation_id", -1), getattr(body, "member_id", "")
    error: int = ErrorCode.none
    denied: set[str] = set()
    if not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, body.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        denied = {
            name
            for name in names
            if name is not None and not access.allowed(broker, request, access.READ, access.TOPIC, name)
        }
        offsets = {tp: offset for tp, offset in offsets.items() if tp.topic not in denied}
    if not error and (generation_id >= 0 or member_id):
        error = int(broker.groups.validate_offset_commit(body.group_id, generation_id, member_id, transactional=True))
    staged: Awaitable[None] | None = None
    if broker.cluster is not None:
        # The group's coordinator (not the transaction's) stages them in the group's partition of
        # __consumer_offsets, as transactional records applied when the transaction's marker comes.
        error = error or int(broker.groups.owner_error(body.group_id))
        if not error:
            now = int(time.time() * 1000)
            staged = broker.groups.stage_txn_offsets(
                body.group_id,
                body.producer_id,
                body.producer_epoch,
                {
                    tp: CommittedOffset(offset, leader_epoch, metadata or "", now)
                    for tp, (offset, metadata, leader_epoch) in offsets.items()
                },
            )
    elif not error:
        error = broker.transactions.txn_offset_commit(
            body.transactional_id,
            body.group_id,
            body.producer_id,
            body.producer_epoch,
            offsets,
            transaction_v2=request.api_version >= 5,
        )
    response = {
        "throttle_time": 0,
        "topics": [
            {
                "name": name,
                "topic_id": getattr(topic, "topic_id", None),
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.topic_authorization_failed
                        if name in denied
                        else error
                        if name is not None
                        else ErrorCode.unknown_topic_id,
                    }
                    for p in topic.partitions
                ],
            }
            for name, topic in zip(names, body.topics, strict=True)
        ],
    }
    if broker.cluster is not None:
        return response if staged is None else Deferred(_after(staged, response))
    return broker.transactions.respond(response)


async def _after(staged: Awaitable[None], response: dict[str, Any]) -> dict[str, Any]:
    try:
        await staged
    except CoordinatorMovedError:
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"] == ErrorCode.none:
                    partition["error_code"] = ErrorCode.not_coordinator
    return response
