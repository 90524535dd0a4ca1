"""Metadata (3): brokers, controller, topics and partitions; may auto-create topics.

One node leads every partition, with itself as the only replica and ISR, in the partition's leader
epoch, which the node bumps at every start (``storage/epochs.py``): clients then validate their
positions with OffsetForLeaderEpoch (KIP-320), as after a leader change. A partition taken offline by an
I/O error (Log.mark_failed) is answered as Kafka answers a partition whose only replica sits in
a failed log directory: LEADER_NOT_AVAILABLE (5), no leader (-1), the node among the offline
replicas. Clients then hold its messages and stop fetching it instead of retrying into
KAFKA_STORAGE_ERROR, and carry on with the other partitions.

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
    node_id = broker.config.node_id
    # Internal topics (__consumer_offsets, __transaction_state) are listed as Kafka lists them,
    # is_internal=true (clients with exclude.internal.topics=false see them), and never auto-created.
    cluster = broker.cluster  # a cluster's brokers answer from the controller's metadata image
    existing = cluster.topics() if cluster is not None else broker.logs.topics()
    listing = body.topics is None or (request.api_version == 0 and not body.topics)
    if listing:
        names: list[str | None] = list(sorted(existing))  # v0 [] and v1+ null both mean "all topics"
    else:
        names = [topic.name for topic in body.topics]
    with_operations = bool(getattr(body, "include_topic_authorized_operations", False))
    offline = {(log.topic, log.partition) for log in broker.logs.logs() if log.failure is not None}
    epochs = {(log.topic, log.partition): log.leader_epoch for log in broker.logs.logs()}
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True)
    topics = []
    for index, name in enumerate(names):
        if name is None:  # v12+: asked for by id
            topic_id = body.topics[index].topic_id
            name = broker.logs.topic_name(topic_id)
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
                info = (
                    cluster.create_topic(name, -1, None, None)
                    if cluster is not None
                    else broker.logs.create_topic(name, broker.config.num_partitions)
                )
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
                "partitions": [
                    cluster.partition_entry(name, index)
                    if cluster is not None
                    else partition_entry(index, node_id, (name, index) in offline, epochs.get((name, index), 0))
                    for index in range(info.partitions)
                ],
                "topic_authorized_operations": access.authorized_operations(
                    broker, request, access.TOPIC, name, with_operations
                ),
            }
        )
    return {
        "throttle_time": 0,
        "brokers": cluster.broker_entries()
        if cluster is not None
        else [{"node_id": node_id, "host": broker.advertised_host, "port": broker.port, "rack": None}],
        "cluster_id": broker.config.cluster_id,
        # never -1: admin clients wait forever for a controller
        "controller_id": cluster.controller_id if cluster is not None else node_id,
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


def partition_entry(index: int, node_id: int, offline: bool, leader_epoch: int = 0) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.leader_not_available if offline else ErrorCode.none,
        "partition_index": index,
        "leader_id": -1 if offline else node_id,
        "leader_epoch": leader_epoch,
        "replica_nodes": (node_id,),
        "isr_nodes": (node_id,),
        "offline_replicas": (node_id,) if offline else (),
    }


def _topic_error(name: str | None, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "is_internal": False,
        "partitions": (),
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
