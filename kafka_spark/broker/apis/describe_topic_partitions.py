"""DescribeTopicPartitions (75, v0, KIP-966): topics and their partitions, paged.

What admin clients of Kafka 3.8+ use for ``describeTopics`` instead of Metadata: the topics asked
for (or every topic, sorted by name, when none is named), at most ``response_partition_limit``
partitions per response, continued from ``cursor`` (a topic and partition index) and pointing to
the next page with ``next_cursor``. A topic asked for that does not exist is
UNKNOWN_TOPIC_OR_PARTITION; nothing is auto-created. One node leads every partition, with itself
as the only replica; the eligible leader replicas (KIP-966) are empty lists, never null: Kafka's Java
admin client dereferences them.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.metadata import NO_AUTHORIZED_OPERATIONS
from kafka_spark.broker.internal_topics import is_internal_topic


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    replicas = broker.replicas  # the controller's metadata image, as this broker last applied it
    existing = replicas.topics()
    asked = bool(body.topics)
    names = sorted({topic.name for topic in body.topics}) if asked else sorted(existing)
    cursor = body.cursor
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    budget = max(body.response_partition_limit, 1)
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in names:
        info = existing.get(name)
        if not access.allowed(broker, request, access.DESCRIBE, access.TOPIC, name):
            if asked:  # a listing leaves out what the principal may not see
                topics.append(
                    {
                        "error_code": ErrorCode.topic_authorization_failed,
                        "name": name,
                        "topic_id": None,
                        "is_internal": False,
                        "partitions": [],
                        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
                    }
                )
            continue
        if info is None:
            topics.append(
                {
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "name": name,
                    "topic_id": None,
                    "is_internal": False,
                    "partitions": [],
                    "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
                }
            )
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = list(range(first, info.partitions))
        if len(indexes) > budget:
            next_cursor = {"topic_name": name, "partition_index": indexes[budget]}
            indexes = indexes[:budget]
        budget -= len(indexes)
        topics.append(
            {
                "error_code": ErrorCode.none,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": is_internal_topic(name),
                "partitions": [
                    {
                        **replicas.partition_entry(name, index),
                        "eligible_leader_replicas": [],
                        "last_known_elr": [],
                    }
                    for index in indexes
                ],
                "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
            }
        )
        if next_cursor is not None:
            break
        if budget == 0:
            following = names[names.index(name) + 1 :]
            if following:
                next_cursor = {"topic_name": following[0], "partition_index": 0}
            break
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
