"""OffsetFetch (9), v1-10: committed offsets of a group; ``topics=null`` (v2+) means all of them.

A partition with no commit answers offset -1, metadata "" and error 0. From v8 one request asks
for many groups and is answered per group; v10 names topics by id (an id no topic has is
UNKNOWN_TOPIC_ID). ``require_stable`` (v7+, KIP-447): a partition whose offset is staged by an
open transaction (TxnOffsetCommit, not yet committed) answers UNSTABLE_OFFSET_COMMIT (88), which
the client retries, instead of an offset that may be about to change. From v9 a member of a
KIP-848 consumer group names itself and its epoch: an unknown member is UNKNOWN_MEMBER_ID, another
epoch than its current one STALE_MEMBER_EPOCH (the group's error). With an authorizer:
DESCRIBE on the group (30) and on each topic (29; topics left out of an all-topics answer).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.topic_ids import topic_id, topic_name
from kafka_spark.common.topic_partition import TopicPartition


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    require_stable = bool(getattr(body, "require_stable", False))
    if request.api_version < 8:
        if not access.allowed(broker, request, access.DESCRIBE, access.GROUP, body.group_id):
            return {
                "throttle_time": 0,
                "topics": _refused(body.topics),
                "error_code": ErrorCode.group_authorization_failed,
            }
        owner = broker.groups.owner_error(body.group_id)  # on a cluster: another broker coordinates it
        if owner:
            return {"throttle_time": 0, "topics": [], "error_code": owner}
        topics = _fetch(broker, request, body.group_id, body.topics, require_stable)
        return {"throttle_time": 0, "topics": topics, "error_code": ErrorCode.none}
    groups = []
    for group in body.groups:
        if not access.allowed(broker, request, access.DESCRIBE, access.GROUP, group.group_id):
            groups.append(
                {"group_id": group.group_id, "error_code": ErrorCode.group_authorization_failed, "topics": []}
            )
        elif broker.groups.owner_error(group.group_id):
            groups.append(
                {"group_id": group.group_id, "error_code": broker.groups.owner_error(group.group_id), "topics": []}
            )
        elif member := broker.groups.consumer.validate_fetch(
            group.group_id, getattr(group, "member_id", None), getattr(group, "member_epoch", -1)
        ):
            groups.append({"group_id": group.group_id, "error_code": member, "topics": []})
        else:
            groups.append(
                {
                    "group_id": group.group_id,
                    "error_code": ErrorCode.none,
                    "topics": _fetch(broker, request, group.group_id, group.topics, require_stable),
                }
            )
    return {"throttle_time": 0, "groups": groups}


def _refused(requested: Any) -> list[dict[str, Any]]:
    """v0-7 answer a refused group on each partition asked for (v2+ also at the top)."""
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.group_authorization_failed,
                }
                for index in topic.partition_indexes
            ],
        }
        for topic in requested or ()
    ]


def _fetch(
    broker: BrokerContext, request: Any, group_id: str, requested: Any, require_stable: bool
) -> list[dict[str, Any]]:
    committed = broker.groups.committed(group_id)
    tp: TopicPartition | None
    staged: set[TopicPartition] = set()
    if require_stable:  # staged in the group's partition (or, by a single node before issue 39, in the transaction)
        staged = broker.groups.offsets.staged_partitions(group_id) | broker.transactions.staged_offsets(group_id)
    if requested is None:
        wanted: dict[str | None, tuple[Any, list[int]]] = {}
        for tp in sorted(committed):
            if access.allowed(broker, request, access.DESCRIBE, access.TOPIC, tp.topic):  # others left out
                wanted.setdefault(tp.topic, (topic_id(broker, tp.topic), []))[1].append(tp.partition)
        entries = [(name, tid, partitions) for name, (tid, partitions) in wanted.items()]
    else:
        entries = [
            (topic_name(broker, topic), getattr(topic, "topic_id", None), list(topic.partition_indexes))
            for topic in requested
        ]
    topics = []
    for name, tid, partitions in entries:
        rows = []
        visible = name is None or access.allowed(broker, request, access.DESCRIBE, access.TOPIC, name)
        for index in partitions:
            tp = TopicPartition(name, index) if name is not None else None
            found = committed.get(tp) if tp is not None else None
            error = (
                ErrorCode.unknown_topic_id
                if name is None
                else ErrorCode.unstable_offset_commit
                if tp in staged
                else ErrorCode.none
            )
            if not visible:
                error = ErrorCode.topic_authorization_failed
            rows.append(
                {
                    "partition_index": index,
                    "committed_offset": -1 if found is None or error else found.offset,
                    "committed_leader_epoch": -1 if found is None or error else found.leader_epoch,
                    "metadata": "" if found is None or error else found.metadata,
                    "error_code": error,
                }
            )
        topics.append({"name": name, "topic_id": tid, "partitions": rows})
    return topics
