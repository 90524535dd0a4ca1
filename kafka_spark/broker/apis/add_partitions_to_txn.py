"""AddPartitionsToTxn (24), v0-5: partitions join the producer's ongoing transaction.

Must precede the first transactional produce to each partition under transaction protocol v1
(Produce answers 48 otherwise). Errors per partition: 49 unknown producer id, 47 (v0-1) / 90
(v2+) stale epoch, 51 while the previous transaction completes, 3 for an unknown partition and
55 OPERATION_NOT_ATTEMPTED for the rest of that request.

v4+ (KIP-890) is what Kafka's partition leaders send their transaction coordinator: many
transactions per request, each either adding its partitions or, with ``verify_only``, asking
whether they are already in the transaction (48 INVALID_TXN_STATE for those that are not).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.transaction_state import fenced_error
from kafka_spark.common.topic_partition import TopicPartition


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if request.api_version >= 4:  # between brokers: the cluster's business
        if not access.allowed_on_cluster(broker, request, access.CLUSTER_ACTION):
            return {
                "throttle_time": 0,
                "error_code": ErrorCode.cluster_authorization_failed,
                "results_by_transaction": [],
            }
        results = [_transaction(broker, txn, request.api_version) for txn in body.transactions]
        return broker.transactions.respond(
            {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}
        )
    transactional_id = body.v3_and_below_transactional_id
    requested = [TopicPartition(topic.name, index) for topic in body.v3_and_below_topics for index in topic.partitions]
    if not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, transactional_id):
        return broker.transactions.respond(
            {
                "throttle_time": 0,
                "results_by_topic_v3_and_below": _grouped(
                    {tp: ErrorCode.transactional_id_authorization_failed for tp in requested}
                ),
            }
        )
    denied = {tp for tp in requested if not access.allowed(broker, request, access.WRITE, access.TOPIC, tp.topic)}
    if denied:  # Kafka: 29 for those, 55 OPERATION_NOT_ATTEMPTED for the rest
        return broker.transactions.respond(
            {
                "throttle_time": 0,
                "results_by_topic_v3_and_below": _grouped(
                    {
                        tp: ErrorCode.topic_authorization_failed if tp in denied else ErrorCode.operation_not_attempted
                        for tp in requested
                    }
                ),
            }
        )
    topic_results = _add(
        broker,
        transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
        body.v3_and_below_topics,
        False,
        request.api_version,
    )
    return broker.transactions.respond({"throttle_time": 0, "results_by_topic_v3_and_below": topic_results})


def _transaction(broker: BrokerContext, txn: Any, version: int) -> dict[str, Any]:
    return {
        "transactional_id": txn.transactional_id,
        "topic_results": _add(
            broker, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only, version
        ),
    }


def _add(
    broker: BrokerContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Any,
    verify_only: bool,
    version: int,
) -> list[dict[str, Any]]:
    requested = [TopicPartition(topic.name, index) for topic in topics for index in topic.partitions]
    coordinator = broker.transactions
    check = coordinator.verify_partitions if verify_only else coordinator.add_partitions
    return _grouped(check(transactional_id, producer_id, producer_epoch, requested, fenced_error(version, 2)))


def _grouped(errors: dict[TopicPartition, int]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "partition_error_code": code})
    return [{"name": name, "results_by_partition": results} for name, results in by_topic.items()]
