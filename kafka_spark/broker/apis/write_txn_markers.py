"""WriteTxnMarkers (27), v1: a transaction coordinator asks the leader of partitions to append
COMMIT or ABORT markers. Broker to broker on a cluster; on any broker it is also how
``kafka-transactions abort`` (AdminClient.abortTransaction) ends a hanging transaction, one that
DescribeProducers shows open in a partition while its coordinator no longer lists it.

Each partition is answered on its own: NOT_LEADER_OR_FOLLOWER where this broker does not lead it
(the coordinator refreshes its metadata and retries at the new leader), UNKNOWN_TOPIC_OR_PARTITION
for a partition that does not exist. As Kafka appends markers with acks=all, the response waits
until the high watermark passes every marker written (or the leadership moved, or
MARKER_REPLICATION_TIMEOUT_MS passed: the coordinator then retries), and, where the topic flushes
before acknowledging acks=all (log.flush.on.ack.all), until the markers are on disk. Needs
CLUSTER_ACTION on the cluster with an authorizer, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.txn_markers import Marker
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: How long a marker may wait for the in-sync replicas before the coordinator is told to retry.
MARKER_REPLICATION_TIMEOUT_MS = 10_000


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    denied = not access.allowed_on_cluster(broker, request, access.CLUSTER_ACTION)
    waits: list[tuple[dict[str, Any], dict[str, Any], Awaitable[None]]] = []
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
                    code, log = broker.markers.write_here(
                        TopicPartition(topic.name, index),
                        Marker(
                            marker.producer_id,
                            marker.producer_epoch,
                            bool(marker.transaction_result),
                            marker.coordinator_epoch,
                        ),
                    )
                    entry["error_code"] = code
                    if log is not None and log.config.flush_on_ack_all:
                        flushed: dict[str, Any] = {"error_code": ErrorCode.none}
                        durable = broker.group_commit.wait_durable(log, log.log_end_offset)
                        waits.append((entry, flushed, _durable(durable, flushed)))
                    if log is not None:  # and the in-sync replicas (none to wait for alone in the ISR)
                        outcome: dict[str, Any] = {"error_code": ErrorCode.none}
                        wait = broker.replicas.wait_replicated(
                            log, outcome, log.log_end_offset, MARKER_REPLICATION_TIMEOUT_MS
                        )
                        if wait is not None:
                            waits.append((entry, outcome, wait))
                        elif outcome["error_code"]:
                            entry["error_code"] = outcome["error_code"]
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    response = {"markers": markers}
    if not waits:
        return response
    return Deferred(_after(waits, response))


async def _after(
    waits: list[tuple[dict[str, Any], dict[str, Any], Awaitable[None]]], response: dict[str, Any]
) -> dict[str, Any]:
    for entry, outcome, wait in waits:
        await wait  # a failure is written into ``outcome`` (wait_replicated's and _durable's contract)
        if outcome["error_code"]:
            entry["error_code"] = outcome["error_code"]
    return response


async def _durable(flush: asyncio.Future[None], outcome: dict[str, Any]) -> None:
    """Wait for ``flush``; a failed fsync answers KAFKA_STORAGE_ERROR, as a failed acks=all produce does."""
    try:
        await flush
    except StorageError as error:
        logger.error("%s", error)
        outcome["error_code"] = ErrorCode.kafka_storage_error
