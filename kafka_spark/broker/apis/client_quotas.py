"""DescribeClientQuotas (48, v0-1; kafka-configs --describe --entity-type users / clients / ips,
AdminClient.describeClientQuotas): this broker sets no client quotas, so every valid filter
matches nothing.

It is served because Kafka's tools ask it beside other things: ``kafka-configs --describe
--entity-type users`` shows a user's SCRAM credentials and quotas together and fails as a whole
when quotas cannot be described. AlterClientQuotas (49) is not served: a client that asks to set
a quota is told the broker does not support it, instead of getting a quota that is never enforced.

The filter is checked as Kafka checks it (INVALID_REQUEST with the reason): entity types are
``user``, ``client-id`` and ``ip``, each at most once, ``ip`` never with the other two; match types
are 0 (this name), 1 (the default entity) and 2 (any specified entity). Needs DESCRIBE_CONFIGS on
the cluster with an authorizer, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    response: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "entries": [],
    }
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE_CONFIGS):
        response.update(error_code=ErrorCode.cluster_authorization_failed, entries=None)
        return response
    problem = filter_problem(request.body.components)
    if problem:
        response.update(error_code=ErrorCode.invalid_request, error_message=problem, entries=None)
    return response


def filter_problem(components: Any) -> str | None:
    """What is wrong with a DescribeClientQuotas filter, or None."""
    seen: set[str] = set()
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            kinds = ", ".join(ENTITY_TYPES)
            return f"entity type {component.entity_type!r} is not a quota entity type; use one of {kinds}"
        if component.entity_type in seen:
            return f"entity type {component.entity_type!r} appears twice in the filter"
        seen.add(component.entity_type)
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return f"match type {component.match_type} is not 0 (exact), 1 (default) or 2 (specified)"
        if component.match_type == MATCH_EXACT and component.match is None:
            return f"an exact match of entity type {component.entity_type!r} needs a name"
    if "ip" in seen and len(seen) > 1:
        return "an ip filter cannot be combined with a user or client-id filter"
    return None
