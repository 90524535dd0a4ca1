"""OffsetFetch (9), v1-5: committed offsets of a group; ``topics=null`` (v2+) means all of them.

A partition with no commit answers offset -1, metadata "" and error 0.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.topic_partition import TopicPartition


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    committed = broker.groups.committed(body.group_id)
    if body.topics is None:
        wanted: dict[str, list[int]] = {}
        for tp in sorted(committed):
            wanted.setdefault(tp.topic, []).append(tp.partition)
    else:
        wanted = {topic.name: list(topic.partition_indexes) for topic in body.topics}
    topics = []
    for name, partitions in wanted.items():
        entries = []
        for index in partitions:
            found = committed.get(TopicPartition(name, index))
            entries.append({
                "partition_index": index,
                "committed_offset": -1 if found is None else found.offset,
                "committed_leader_epoch": -1 if found is None else found.leader_epoch,
                "metadata": "" if found is None else found.metadata,
                "error_code": 0,
            })
        topics.append({"name": name, "partitions": entries})
    return {"throttle_time": 0, "topics": topics, "error_code": 0}
