"""DescribeProducers (61, v0; kafka-transactions describe-producers and find-hanging,
AdminClient.describeProducers): the producers a partition knows, with their open transactions.

Per partition, every producer in its producer state (storage/producer_state.py): id, epoch, last
sequence (-1 for a producer that wrote only markers), the timestamp of its last batch, the
coordinator epoch of its last COMMIT/ABORT marker (-1: none) and the first offset of its open
transaction (-1: none). A transaction open longer than the coordinator's timeout that the
coordinator does not list is what ``find-hanging`` reports, and ``kafka-transactions abort``
ends it with an ABORT marker (WriteTxnMarkers).

As Kafka answers: READ on the topic, else TOPIC_AUTHORIZATION_FAILED; UNKNOWN_TOPIC_OR_PARTITION
for a partition that does not exist. The leader answers from its producer state and a follower
from its own log (rebuilt from the batch headers for the answer: followers keep no producer
state); a broker without a replica answers NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.producer_state import PartitionProducerState
from kafka_spark.broker.storage.txn_index import marker_coordinator_epoch


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.body.topics:
        allowed = access.allowed(broker, request, access.READ, access.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": ErrorCode.none,
                "error_message": None,
                "active_producers": [],
            }
            if not allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
            else:
                code, state = _producer_state(broker, topic.name, index)
                if code:
                    entry["error_code"] = code
                else:
                    assert state is not None
                    entry["active_producers"] = _producers(state)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _producer_state(broker: BrokerContext, topic: str, index: int) -> tuple[int, PartitionProducerState | None]:
    code, log, leads = broker.replicas.hosted_replica(topic, index)
    if code or log is None:
        return code or ErrorCode.not_leader_or_follower, None
    return ErrorCode.none, broker.producer_state(log) if leads else PartitionProducerState.load(log)


def _producers(state: PartitionProducerState) -> list[dict[str, Any]]:
    ongoing = state.txn_index.ongoing if state.txn_index is not None else {}
    log = state.txn_index.log if state.txn_index is not None else None
    return [
        {
            "producer_id": producer_id,
            "producer_epoch": entry.epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": _coordinator_epoch(log, entry.last_marker_offset),
            "current_txn_start_offset": ongoing.get(producer_id, -1),
        }
        for producer_id, entry in sorted(state.producers.items())
    ]


def _coordinator_epoch(log: Log | None, marker_offset: int) -> int:
    """The coordinator epoch in the marker at ``marker_offset`` (-1: no marker, or it is gone
    below the log start offset)."""
    if log is None or marker_offset < log.log_start_offset:
        return -1
    try:
        batch = log.read(marker_offset, 1, max_offset=log.log_end_offset)
    except StorageError:
        return -1
    if not batch:
        return -1
    return marker_coordinator_epoch(memoryview(batch))
