"""AddPartitionsToTxn (24), v0-2: partitions join the producer's ongoing transaction.

Must precede the first transactional produce to each partition (Produce answers 48 otherwise).
Errors per partition: 49 unknown producer id, 47 (v0-1) / 90 (v2) stale epoch, 51 while the
previous transaction completes, 3 for an unknown partition and 55 OPERATION_NOT_ATTEMPTED for
the rest of that request.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.transactions import fenced_error
from kafka_spark.topic_partition import TopicPartition


def handle(broker: Any, request: Any) -> Any:
    body = request.body
    requested = [(topic.name, index) for topic in body.v3_and_below_topics for index in topic.partitions]
    errors = broker.transactions.add_partitions(
        body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
        [TopicPartition(name, index) for name, index in requested], fenced_error(request.api_version, 2),
    )
    by_topic: dict[str, list[dict[str, int]]] = {}
    for name, index in requested:
        by_topic.setdefault(name, []).append(
            {"partition_index": index, "partition_error_code": errors[TopicPartition(name, index)]}
        )
    response = {
        "throttle_time": 0,
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": results} for name, results in by_topic.items()
        ],
    }
    return broker.transactions.respond(response)
