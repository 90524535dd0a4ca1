"""ListConfigResources (74), v0-1: the resources that have configs (KIP-1142; v0 was KIP-714's
ListClientMetricsResources), for AdminClient.list_config_resources and ``kafka-configs --list``.

v0 lists client-metrics subscriptions only: this broker has none (it takes no client telemetry),
so the list is empty, as Kafka's is until a subscription is configured. v1 lists the types asked
for (all of them when none is named), in Kafka's order: groups with dynamic configs (none: group
configs cannot be set here), client-metrics subscriptions (none), every live broker as a broker
logger and as a broker, and every topic, internal ones included. A type v1 does not know (anything
but topic 2, broker 4, broker logger 8, client metrics 16 and group 32) fails the whole request
with UNSUPPORTED_VERSION (35) and no resources, as Kafka answers. With an authorizer:
DESCRIBE_CONFIGS on the cluster (31 CLUSTER_AUTHORIZATION_FAILED, no resources).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_KAFKA_ORDER = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE_CONFIGS):
        return _response(ErrorCode.cluster_authorization_failed, [])
    if request.api_version == 0:
        return _response(ErrorCode.none, [])  # client-metrics subscriptions: none
    asked = set(request.body.resource_types) or set(_KAFKA_ORDER)
    if not asked <= set(_KAFKA_ORDER):
        return _response(ErrorCode.unsupported_version, [])
    brokers = [str(entry["node_id"]) for entry in broker.replicas.broker_entries()]
    names = {
        GROUP: [],
        CLIENT_METRICS: [],
        BROKER_LOGGER: brokers,
        BROKER: brokers,
        TOPIC: sorted(broker.replicas.topics()),
    }
    resources = [
        {"resource_name": name, "resource_type": kind} for kind in _KAFKA_ORDER if kind in asked for name in names[kind]
    ]
    return _response(ErrorCode.none, resources)


def _response(code: int, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "config_resources": resources}
