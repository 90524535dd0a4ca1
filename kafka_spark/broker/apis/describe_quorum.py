"""DescribeQuorum (55), v0-2: the controller quorum of the metadata log ``__cluster_metadata-0``,
for ``kafka-metadata-quorum describe --status / --replication`` and AdminClient's
describe_metadata_quorum. It is read from the controller (``Controller.quorum``,
metadata/quorum.py): a single node is a quorum of one voter, its own leader; the nodes of an
EmbeddedCluster are its voters, the active controller their leader. No node is an observer.

As Kafka's raft client answers: a request that is not exactly partition 0 of
``__cluster_metadata`` gets UNKNOWN_TOPIC_OR_PARTITION (3) on every partition it names. v1 adds
each voter's last fetch and last caught-up times (the leader's are now), v2 the voters' endpoints
(the listener pylog has: a node's controller role answers on its broker listener) and directory
ids (none: pylog's voters are configured by node id alone, as ``controller.quorum.voters`` makes
Kafka's). With an authorizer: DESCRIBE on the cluster (31 CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.metadata.quorum import METADATA_PARTITION, METADATA_TOPIC

_NOT_HOSTED = "This server does not host this topic-partition."


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    topics = request.body.topics
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE):
        return _response(ErrorCode.cluster_authorization_failed, "not authorized to DESCRIBE the cluster", [])
    asked = [(topic.topic_name, partition.partition_index) for topic in topics for partition in topic.partitions]
    if asked != [(METADATA_TOPIC, METADATA_PARTITION)]:
        described = [
            {
                "topic_name": topic.topic_name,
                "partitions": [_partition_error(partition.partition_index) for partition in topic.partitions],
            }
            for topic in topics
        ]
        return _response(ErrorCode.none, "", described)
    quorum = broker.replicas.controller.quorum()
    partition = {
        "partition_index": METADATA_PARTITION,
        "error_code": ErrorCode.none,
        "error_message": "",
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "current_voters": [
            {
                "replica_id": voter.node_id,
                "replica_directory_id": None,
                "log_end_offset": voter.log_end_offset,
                "last_fetch_timestamp": voter.last_fetch_timestamp,
                "last_caught_up_timestamp": voter.last_caught_up_timestamp,
            }
            for voter in quorum.voters
        ],
        "observers": [],
    }
    listener = broker.config.security_protocol  # the listener is named after its protocol
    nodes = [
        {"node_id": voter.node_id, "listeners": [{"name": listener, "host": voter.host, "port": voter.port}]}
        for voter in quorum.voters
    ]
    return _response(ErrorCode.none, "", [{"topic_name": METADATA_TOPIC, "partitions": [partition]}], nodes)


def _partition_error(index: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": ErrorCode.unknown_topic_or_partition,
        "error_message": _NOT_HOSTED,
        "leader_id": 0,
        "leader_epoch": 0,
        "high_watermark": 0,
        "current_voters": [],
        "observers": [],
    }


def _response(code: int, message: str | None, topics: list[dict[str, Any]], nodes: list | None = None) -> dict:
    return {"error_code": code, "error_message": message, "topics": topics, "nodes": nodes or []}
