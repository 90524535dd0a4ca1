"""TxnOffsetCommit (28), v0-2: consumer offsets staged in a transaction.

Sent to the group coordinator after AddOffsetsToTxn; this node is both coordinators, so the
offsets are staged in the transaction coordinator and handed to the group coordinator
(``broker.groups.commit_offsets``) when the transaction commits; an abort drops them. The one
error (49, 47, 48 without AddOffsetsToTxn) applies to every partition.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.topic_partition import TopicPartition


def handle(broker: Any, request: Any) -> Any:
    body = request.body
    offsets = {
        TopicPartition(topic.name, partition.partition_index): (partition.committed_offset,
                                                                 partition.committed_metadata)
        for topic in body.topics
        for partition in topic.partitions
    }
    error = broker.transactions.txn_offset_commit(
        body.transactional_id, body.group_id, body.producer_id, body.producer_epoch, offsets
    )
    response = {
        "throttle_time": 0,
        "topics": [
            {"name": topic.name,
             "partitions": [{"partition_index": p.partition_index, "error_code": error} for p in topic.partitions]}
            for topic in body.topics
        ],
    }
    return broker.transactions.respond(response)
