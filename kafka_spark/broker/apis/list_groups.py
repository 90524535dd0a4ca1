"""ListGroups (16): every group with members or committed offsets, with its state (v4+) and
type (v5+: "classic", or "consumer" for a KIP-848 consumer group, whose states are Kafka's
Empty, Assigning, Reconciling and Stable). ``states_filter`` (v4, KIP-518) and
``types_filter`` (v5, KIP-848) keep the groups whose state or type they name, compared without
regard to case as Kafka does; empty filters keep every group. With an authorizer, a principal
without DESCRIBE on the cluster sees only the groups it may DESCRIBE."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    states = {state.lower() for state in getattr(body, "states_filter", ())}
    types = {kind.lower() for kind in getattr(body, "types_filter", ())}
    coordinator = broker.groups
    groups: list[dict[str, Any]] = []
    everything = access.allowed_on_cluster(broker, request, access.DESCRIBE)
    for group_id in coordinator.group_ids():
        if not everything and not access.allowed(broker, request, access.DESCRIBE, access.GROUP, group_id):
            continue
        kind = coordinator.group_type(group_id)
        if types and kind not in types:
            continue
        if kind == "consumer":
            consumer_group = coordinator.consumer.group(group_id)
            assert consumer_group is not None
            state, protocol_type = consumer_group.state, "consumer"
        else:
            group = coordinator.group(group_id)
            state = coordinator.state_of(group_id).value
            protocol_type = (group.protocol_type if group is not None else None) or "consumer"
        if states and state.lower() not in states:
            continue
        groups.append({"group_id": group_id, "protocol_type": protocol_type, "group_state": state, "group_type": kind})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups}
