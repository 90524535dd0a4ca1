"""OffsetDelete (47), v0: delete some committed offsets of a group (kafka-consumer-groups
--delete-offsets, AdminClient.delete_consumer_group_offsets). Partitions of topics the group's
members subscribe to are refused (86 GROUP_SUBSCRIBED_TO_TOPIC), as in Kafka; the response waits
(without holding up the connection) for the tombstones' fsync."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.group import write_error_code
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.coordinator.group")


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if not access.allowed(broker, request, access.DELETE, access.GROUP, body.group_id):
        return _response(ErrorCode.group_authorization_failed, body, {})
    readable = {
        topic.name for topic in body.topics if access.allowed(broker, request, access.READ, access.TOPIC, topic.name)
    }
    partitions = [
        TopicPartition(topic.name, p.partition_index)
        for topic in body.topics
        for p in topic.partitions
        if topic.name in readable
    ]
    try:
        code, errors, durable = broker.groups.delete_offsets(body.group_id, partitions)
        errors = {
            **errors,
            **{
                TopicPartition(topic.name, p.partition_index): ErrorCode.topic_authorization_failed
                for topic in body.topics
                if topic.name not in readable
                for p in topic.partitions
            },
        }
    except StorageError as error:
        logger.error("deleting offsets of group %s failed: %s", body.group_id, error)
        return _response(ErrorCode.kafka_storage_error, body, {})
    response = _response(int(code), body, {tp: int(c) for tp, c in errors.items()})
    if durable is None:
        return response
    return Deferred(_after(durable, response, body))


def _response(code: int, body: Any, errors: dict[TopicPartition, int]) -> dict[str, Any]:
    return {
        "error_code": code,
        "throttle_time": 0,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors.get(TopicPartition(topic.name, p.partition_index), ErrorCode.none),
                    }
                    for p in topic.partitions
                ],
            }
            for topic in body.topics
        ]
        if code == ErrorCode.none
        else [],
    }


async def _after(durable: Awaitable[None], response: dict[str, Any], body: Any) -> dict[str, Any]:
    try:
        await durable
    except StorageError as error:
        logger.error("group %s's offset tombstones not stored: %s", body.group_id, error)
        return _response(write_error_code(error), body, {})
    return response
