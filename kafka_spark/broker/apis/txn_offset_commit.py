"""TxnOffsetCommit (28), v0-6: consumer offsets staged in a transaction.

Sent to the group coordinator after AddOffsetsToTxn. As in Kafka, the group's coordinator writes
the offsets to the group's partition of ``__consumer_offsets`` as transactional records of the
producer, durable (and replicated) before it answers, and applies them when the transaction's
COMMIT marker reaches that partition (AddOffsetsToTxn made it a partition of the transaction); an
ABORT drops them. Where this broker also coordinates the transactional id (always on a single
node) the transaction is checked first: the producer's id and epoch (49, 47) and the group's
place in its ongoing transaction (48 without AddOffsetsToTxn); elsewhere the group's coordinator
trusts the producer, as Kafka's did before KIP-890. The one error applies to every partition.

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
from kafka_spark.broker.coordinator.group import write_error_code
from kafka_spark.broker.coordinator.group_offsets import CommittedOffset
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.storage.errors import StorageError
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
        error = int(
            broker.groups.validate_offset_commit(
                body.group_id,
                generation_id,
                member_id,
                transactional=True,
                partitions=[(tp.topic, tp.partition) for tp in offsets],
            )
        )
    staged: Awaitable[None] | None = None
    error = error or int(broker.groups.owner_error(body.group_id))
    if not error:
        verified = broker.transactions.verify_offsets(
            body.transactional_id,
            body.group_id,
            body.producer_id,
            body.producer_epoch,
            transaction_v2=request.api_version >= 5,
        )
        if verified != ErrorCode.not_coordinator:  # the transaction is coordinated elsewhere: trusted
            error = verified
    if not error:
        # The group's coordinator stages them in the group's partition of __consumer_offsets, as
        # transactional records applied when the transaction's marker comes.
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
    # The transaction's record (a v2 group joining it) and the staged offsets, both durable.
    answer = broker.transactions.respond(response)
    if staged is None:
        return answer
    return Deferred(_after(staged, answer))


async def _after(staged: Awaitable[None], answer: Any) -> dict[str, Any]:
    response: dict[str, Any] = await answer.response if isinstance(answer, Deferred) else answer
    try:
        await staged
    except StorageError as error:
        code = write_error_code(error)  # NOT_COORDINATOR: the coordinator lost its partition
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"] == ErrorCode.none:
                    partition["error_code"] = code
    return response
