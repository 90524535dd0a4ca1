"""WriteTxnMarkers (27), v1: a transaction coordinator asks the leader of partitions to append
COMMIT or ABORT markers (broker to broker, advertised on the brokers of a cluster only).

Each partition is answered on its own: NOT_LEADER_OR_FOLLOWER where this broker does not lead it
(the coordinator refreshes its metadata and retries at the new leader), UNKNOWN_TOPIC_OR_PARTITION
for a partition that does not exist. As Kafka appends markers with acks=all, the response waits
until the high watermark passes every marker written (or the leadership moved, or
MARKER_REPLICATION_TIMEOUT_MS passed: the coordinator then retries). Needs CLUSTER_ACTION on the
cluster with an authorizer, as in Kafka.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.deferred import Deferred
from kafka_spark.common.topic_partition import TopicPartition

#: How long a marker may wait for the in-sync replicas before the coordinator is told to retry.
MARKER_REPLICATION_TIMEOUT_MS = 10_000


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    denied = not access.allowed_on_cluster(broker, request, access.CLUSTER_ACTION)
    waits: list[tuple[dict[str, Any], dict[str, Any], asyncio.Future[None]]] = []
    markers = []
    for marker in body.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                entry: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.none}
                if denied:
                    entry["error_code"] = ErrorCode.cluster_authorization_failed
                else:
                    code, log = broker.transactions.write_marker(
                        TopicPartition(topic.name, index),
                        marker.producer_id,
                        marker.producer_epoch,
                        bool(marker.transaction_result),
                        marker.coordinator_epoch,
                    )
                    entry["error_code"] = code
                    if log is not None and broker.cluster is not None:
                        outcome: dict[str, Any] = {"error_code": ErrorCode.none}
                        wait = broker.cluster.wait_replicated(
                            log, outcome, log.log_end_offset, MARKER_REPLICATION_TIMEOUT_MS
                        )
                        waits.append((entry, outcome, wait))
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    response = {"markers": markers}
    if not waits:
        return response
    return Deferred(_after(waits, response))


async def _after(
    waits: list[tuple[dict[str, Any], dict[str, Any], asyncio.Future[None]]], response: dict[str, Any]
) -> dict[str, Any]:
    for entry, outcome, wait in waits:
        await wait  # a failure is written into ``outcome`` (wait_replicated's contract)
        entry["error_code"] = outcome["error_code"]
    return response
