"""OffsetFetch (9), v1-10: committed offsets of a group; ``topics=null`` (v2+) means all of them.

A partition with no commit answers offset -1, metadata "" and error 0. From v8 one request asks
for many groups and is answered per group; v10 names topics by id (an id no topic has is
UNKNOWN_TOPIC_ID). ``require_stable`` (v7+, KIP-447): a partition whose offset is staged by an
open transaction (TxnOffsetCommit, not yet committed) answers UNSTABLE_OFFSET_COMMIT (88), which
the client retries, instead of an offset that may be about to change.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.apis.topic_ids import UNKNOWN_TOPIC_ID, topic_id, topic_name
from kafka_spark.topic_partition import TopicPartition

_UNSTABLE_OFFSET_COMMIT = 88


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    require_stable = bool(getattr(body, "require_stable", False))
    if request.api_version < 8:
        topics = _fetch(broker, body.group_id, body.topics, require_stable)
        return {"throttle_time": 0, "topics": topics, "error_code": 0}
    groups = [{"group_id": group.group_id, "error_code": 0,
               "topics": _fetch(broker, group.group_id, group.topics, require_stable)}
              for group in body.groups]
    return {"throttle_time": 0, "groups": groups}


def _fetch(broker: Any, group_id: str, requested: Any, require_stable: bool) -> list[dict[str, Any]]:
    committed = broker.groups.committed(group_id)
    staged = broker.transactions.staged_offsets(group_id) if require_stable else set()
    if requested is None:
        wanted: dict[str | None, tuple[Any, list[int]]] = {}
        for tp in sorted(committed):
            wanted.setdefault(tp.topic, (topic_id(broker, tp.topic), []))[1].append(tp.partition)
        entries = [(name, tid, partitions) for name, (tid, partitions) in wanted.items()]
    else:
        entries = [(topic_name(broker, topic), getattr(topic, "topic_id", None), list(topic.partition_indexes))
                   for topic in requested]
    topics = []
    for name, tid, partitions in entries:
        rows = []
        for index in partitions:
            tp = TopicPartition(name, index) if name is not None else None
            found = committed.get(tp) if tp is not None else None
            error = UNKNOWN_TOPIC_ID if name is None else (_UNSTABLE_OFFSET_COMMIT if tp in staged else 0)
            rows.append({
                "partition_index": index,
                "committed_offset": -1 if found is None or error else found.offset,
                "committed_leader_epoch": -1 if found is None or error else found.leader_epoch,
                "metadata": "" if found is None or error else found.metadata,
                "error_code": error,
            })
        topics.append({"name": name, "topic_id": tid, "partitions": rows})
    return topics
