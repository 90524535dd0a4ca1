"""Heartbeat (12): keeps a member's session; 27 tells it to rejoin during a rebalance."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    code = broker.groups.heartbeat(
        body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
    )
    return {"throttle_time": 0, "error_code": code}
