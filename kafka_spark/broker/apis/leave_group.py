"""LeaveGroup (13): members leave; the others rebalance at once. v0-2 name one member; from v3
(KIP-345) a request names many, each by member id and/or ``group.instance.id``, and is answered
per member."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "members": []}
    if request.api_version < 3:
        return {"throttle_time": 0, "error_code": broker.groups.leave(body.group_id, body.member_id)}
    members = [
        {
            "member_id": member.member_id,
            "group_instance_id": member.group_instance_id,
            "error_code": broker.groups.leave(body.group_id, member.member_id, member.group_instance_id),
        }
        for member in body.members
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "members": members}
