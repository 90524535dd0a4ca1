"""DeleteRecords (21): move partitions' log start offsets forward (AdminClient.delete_records,
kafka-delete-records). Records below the new start are gone, as after retention."""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.metadata import is_internal_topic
from kafka_spark.broker.storage.errors import StorageError

_UNKNOWN_TOPIC_OR_PARTITION = 3


def handle(broker: Any, request: Any) -> dict[str, Any]:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for partition in topic.partitions:
            result = {"partition_index": partition.partition_index, "low_watermark": -1, "error_code": 0}
            if not access.allowed(broker, request, access.DELETE, access.TOPIC, topic.name):
                result["error_code"] = access.TOPIC_AUTHORIZATION_FAILED
            elif is_internal_topic(topic.name):
                result["error_code"] = _UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    log = broker.logs.get_log(topic.name, partition.partition_index)
                    result["low_watermark"] = log.delete_records_before(partition.offset)
                except StorageError as error:
                    result["error_code"] = error.error_code
            partitions.append(result)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
