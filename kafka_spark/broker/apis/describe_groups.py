"""DescribeGroups (15): state, protocol and members (with metadata and assignment) per group.

An unknown group, or a KIP-848 consumer group (ConsumerGroupDescribe describes those), is
described as Dead with no members and error 0, as Kafka does; from v6 (KIP-1043) it is
GROUP_ID_NOT_FOUND (69) with a message instead. With an authorizer: DESCRIBE on
the group (30), and ``include_authorized_operations`` (v3+) answered.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.classic_state import GroupState


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    with_operations = bool(getattr(request.body, "include_authorized_operations", False))
    groups = []
    for group_id in request.body.groups:
        if not access.allowed(broker, request, access.DESCRIBE, access.GROUP, group_id):
            groups.append(
                {
                    "error_code": ErrorCode.group_authorization_failed,
                    "error_message": None,
                    "group_id": group_id,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                    "authorized_operations": access.NOT_REQUESTED,
                }
            )
            continue
        described = _describe(broker.groups, group_id, request.api_version)
        if broker.groups.owner_error(group_id):  # on a cluster: another broker coordinates it
            described.update(error_code=broker.groups.owner_error(group_id), error_message=None, group_state="")
        # A group described with an error (not found, not classic) carries none, as Kafka's.
        described["authorized_operations"] = access.authorized_operations(
            broker, request, access.GROUP, group_id, with_operations and not described["error_code"]
        )
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}


def _describe(coordinator: Any, group_id: str, version: int) -> dict[str, Any]:
    group = coordinator.group(group_id)
    state = coordinator.state_of(group_id)
    described: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "group_id": group_id,
        "group_state": state.value,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }
    if coordinator.group_type(group_id) == "consumer":  # described by ConsumerGroupDescribe
        described["group_state"] = GroupState.DEAD.value
        if version >= 6:
            described.update(
                error_code=ErrorCode.group_id_not_found, error_message=f"Group {group_id} is not a classic group."
            )
        return described
    if state is GroupState.DEAD and version >= 6:
        described.update(error_code=ErrorCode.group_id_not_found, error_message=f"Group {group_id} not found.")
        return described
    if group is None:
        if state is GroupState.EMPTY:
            described["protocol_type"] = "consumer"
        return described
    described["protocol_type"] = group.protocol_type or ""
    # Kafka reports the protocol only once it is chosen and stable enough to mean something.
    if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        described["protocol_data"] = group.protocol_name or ""
    described["members"] = [
        {
            "member_id": member.member_id,
            "group_instance_id": member.group_instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "member_metadata": member.metadata(group.protocol_name) if group.protocol_name else b"",
            "member_assignment": member.assignment if state is GroupState.STABLE else b"",
        }
        for member in group.members.values()
    ]
    return described
