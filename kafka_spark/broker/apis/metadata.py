"""Metadata (3): brokers, controller, topics and partitions; may auto-create topics.

Brokers, topics and partitions (leader, leader epoch, replicas, ISR, offline replicas) come from
the metadata image this broker last applied (replication/replica_manager.py); a single node, a
cluster of one, leads every partition as its only replica, in a leader epoch bumped at every start,
so clients validate their positions with OffsetForLeaderEpoch (KIP-320), as after a leader change.
A partition whose leader's log an I/O error took offline (Log.mark_failed) is answered by that
broker as Kafka answers a partition whose replica sits in a failed log directory:
LEADER_NOT_AVAILABLE (5), no leader (-1), the broker among the offline replicas. Clients then hold
its messages and stop fetching it instead of retrying into KAFKA_STORAGE_ERROR, and carry on with
the other partitions.

With an authorizer (authorizer.py), a listing of all topics leaves out those the principal may not
DESCRIBE and a topic asked for by name answers TOPIC_AUTHORIZATION_FAILED (29), whether it exists
or not, as Kafka does; auto-creation needs CREATE on the cluster or the topic.
``include_topic_authorized_operations`` (v8+) and ``include_cluster_authorized_operations``
(v8-10) are answered with the operations the principal may perform.

Topic ids (v10+) are answered for every topic; from v12 a topic may be asked for by id alone (its
name null), and an id no topic has is answered UNKNOWN_TOPIC_ID (100) with a null name.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.authorizer import CLUSTER_NAME
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.broker.storage.log_manager import is_valid_topic_name

NO_AUTHORIZED_OPERATIONS = -2147483648


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    # Internal topics (__consumer_offsets, __transaction_state) are listed as Kafka lists them,
    # is_internal=true (clients with exclude.internal.topics=false see them), and never auto-created.
    replicas = broker.replicas  # the controller's metadata image, as this broker last applied it
    existing = replicas.topics()
    listing = body.topics is None or (request.api_version == 0 and not body.topics)
    if listing:
        names: list[str | None] = list(sorted(existing))  # v0 [] and v1+ null both mean "all topics"
    else:
        names = [topic.name for topic in body.topics]
    with_operations = bool(getattr(body, "include_topic_authorized_operations", False))
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True)
    topics = []
    for index, name in enumerate(names):
        if name is None:  # v12+: asked for by id
            topic_id = body.topics[index].topic_id
            name = replicas.topic_name(topic_id)
            if name is None:
                topics.append({**_topic_error(None, ErrorCode.unknown_topic_id), "topic_id": topic_id})
                continue
        if not access.allowed(broker, request, access.DESCRIBE, access.TOPIC, name):
            if not listing:  # a topic listing leaves out what the principal may not see
                topics.append(_topic_error(name, ErrorCode.topic_authorization_failed))
            continue
        info = existing.get(name)
        if (
            info is None
            and allow_auto_create
            and broker.config.auto_create_topics_enable
            and not is_internal_topic(name)
            and (
                access.allowed_on_cluster(broker, request, access.CREATE)
                or access.allowed(broker, request, access.CREATE, access.TOPIC, name)
            )
        ):
            try:
                info = replicas.create_topic(name, -1, None, None)
            except StorageError as error:
                topics.append(_topic_error(name, error.error_code))
                continue
        if info is None:
            code = (
                ErrorCode.unknown_topic_or_partition if is_valid_topic_name(name) else ErrorCode.invalid_topic_exception
            )
            topics.append(_topic_error(name, code))
            continue
        topics.append(
            {
                "error_code": ErrorCode.none,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": is_internal_topic(name),
                "partitions": [replicas.partition_entry(name, index) for index in range(info.partitions)],
                "topic_authorized_operations": access.authorized_operations(
                    broker, request, access.TOPIC, name, with_operations
                ),
            }
        )
    return {
        "throttle_time": 0,
        "brokers": replicas.broker_entries(),
        "cluster_id": broker.config.cluster_id,
        # never -1: admin clients wait forever for a controller
        "controller_id": replicas.controller_id,
        "topics": topics,
        "cluster_authorized_operations": access.authorized_operations(
            broker,
            request,
            access.CLUSTER,
            CLUSTER_NAME,
            bool(getattr(body, "include_cluster_authorized_operations", False)),
        ),  # v8-10
        "error_code": ErrorCode.none,
    }


def _topic_error(name: str | None, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "is_internal": False,
        "partitions": (),
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
