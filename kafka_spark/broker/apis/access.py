"""Authorization checks shared by the API handlers (the decisions are authorizer.py's).

Every check allows everything when the broker has no authorizer (no authorizer.class.name), as
Kafka does; handlers then pay one attribute test. Error codes are Kafka's: a request refused on a
topic answers TOPIC_AUTHORIZATION_FAILED on that topic's partitions, on a group
GROUP_AUTHORIZATION_FAILED, on a transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED, on the
cluster CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.authorizer import CLUSTER_NAME, Operation, ResourceType, all_operations

#: What the authorized-operations fields hold when the client did not ask for them.
NOT_REQUESTED = -2147483648

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DELETE,
    Operation.ALTER,
    Operation.DESCRIBE,
)
DESCRIBE_CONFIGS, ALTER_CONFIGS = Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS
CLUSTER_ACTION, IDEMPOTENT_WRITE = Operation.CLUSTER_ACTION, Operation.IDEMPOTENT_WRITE


def _host(request: Any) -> str:
    return getattr(request, "client_host", "").lstrip("/") or "*"


def allowed(broker: BrokerContext, request: Any, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    authorizer = broker.authorizer
    return authorizer is None or authorizer.authorize(request.principal, _host(request), operation, resource_type, name)


def allowed_on_cluster(broker: BrokerContext, request: Any, operation: Operation) -> bool:
    return allowed(broker, request, operation, CLUSTER, CLUSTER_NAME)


def allowed_on_any(broker: BrokerContext, request: Any, operation: Operation, resource_type: ResourceType) -> bool:
    """``operation`` on at least one resource of the type (an idempotent producer: WRITE on some topic)."""
    authorizer = broker.authorizer
    return authorizer is None or authorizer.authorize_any(request.principal, _host(request), operation, resource_type)


def authorized_operations(
    broker: BrokerContext, request: Any, resource_type: ResourceType, name: str, requested: bool = True
) -> int:
    """The authorized-operations bit field of a resource (every supported operation without an
    authorizer), or NOT_REQUESTED."""
    if not requested:
        return NOT_REQUESTED
    authorizer = broker.authorizer
    if authorizer is None:
        return all_operations(resource_type)
    return authorizer.authorized_operations(request.principal, _host(request), resource_type, name)
