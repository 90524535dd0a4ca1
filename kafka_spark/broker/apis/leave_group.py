"""LeaveGroup (13), v0-2: one member leaves; the others rebalance at once."""

from __future__ import annotations

from typing import Any


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    return {"throttle_time": 0, "error_code": broker.groups.leave(body.group_id, body.member_id)}
