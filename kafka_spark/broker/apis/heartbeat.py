"""Heartbeat (12): keeps a member's session; 27 tells it to rejoin during a rebalance."""

from __future__ import annotations

from typing import Any


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    code = broker.groups.heartbeat(body.group_id, body.generation_id, body.member_id,
                                   getattr(body, "group_instance_id", None))
    return {"throttle_time": 0, "error_code": code}
