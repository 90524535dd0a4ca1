"""ListGroups (16): every group with members or committed offsets."""

from __future__ import annotations

from typing import Any


def handle(broker: Any, request: Any) -> dict[str, Any]:
    coordinator = broker.groups
    groups = []
    for group_id in coordinator.group_ids():
        group = coordinator.group(group_id)
        protocol_type = (group.protocol_type if group is not None else None) or "consumer"
        groups.append({"group_id": group_id, "protocol_type": protocol_type,
                       "group_state": coordinator.state_of(group_id).value})
    return {"throttle_time": 0, "error_code": 0, "groups": groups}
