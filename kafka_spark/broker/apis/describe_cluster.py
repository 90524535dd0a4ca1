"""DescribeCluster (60, v0-2): the cluster id, the controller and the brokers, for admin clients'
describe_cluster(): the live brokers of the metadata and the active controller (a single node is
both). (Metadata answers the same.) v1's
endpoint type: brokers (1) are described; controllers (2) are asked of controllers, so a broker
answers MISMATCHED_ENDPOINT_TYPE, and any other type UNSUPPORTED_ENDPOINT_TYPE, as Kafka's
AuthHelper does. ``include_cluster_authorized_operations`` is answered with what the principal may
do on the cluster (everything, without an authorizer)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.authorizer import CLUSTER_NAME

_BROKERS, _CONTROLLERS = 1, 2


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    endpoint_type = getattr(request.body, "endpoint_type", _BROKERS)
    if endpoint_type != _BROKERS:
        error = (
            ErrorCode.mismatched_endpoint_type if endpoint_type == _CONTROLLERS else ErrorCode.unsupported_endpoint_type
        )
        return {
            "throttle_time": 0,
            "error_code": error,
            "endpoint_type": endpoint_type,
            "error_message": f"endpoint type {endpoint_type} is not served by a broker; ask for brokers (1)",
            "cluster_id": broker.config.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": access.NOT_REQUESTED,
        }
    replicas = broker.replicas  # every live broker and the active controller, from the metadata
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": _BROKERS,
        "cluster_id": broker.config.cluster_id,
        "controller_id": replicas.controller_id,
        "brokers": [
            {
                "broker_id": entry["node_id"],
                "host": entry["host"],
                "port": entry["port"],
                "rack": None,
                "is_fenced": False,  # v2: only live brokers are listed
            }
            for entry in replicas.broker_entries()
        ],
        "cluster_authorized_operations": access.authorized_operations(
            broker,
            request,
            access.CLUSTER,
            CLUSTER_NAME,
            bool(getattr(request.body, "include_cluster_authorized_operations", False)),
        ),
    }
