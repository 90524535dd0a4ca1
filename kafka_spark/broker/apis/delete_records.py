"""DeleteRecords (21): move partitions' log start offsets forward (AdminClient.delete_records,
kafka-delete-records). Records below the new start are gone, as after retention."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.storage.errors import StorageError


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for partition in topic.partitions:
            result = {"partition_index": partition.partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
            if not access.allowed(broker, request, access.DELETE, access.TOPIC, topic.name):
                result["error_code"] = ErrorCode.topic_authorization_failed
            elif is_internal_topic(topic.name):
                result["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    log = broker.logs.get_log(topic.name, partition.partition_index)
                    result["low_watermark"] = log.delete_records_before(partition.offset)
                except StorageError as error:
                    result["error_code"] = error.error_code
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
