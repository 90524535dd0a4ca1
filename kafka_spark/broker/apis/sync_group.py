"""SyncGroup (14): the leader hands out assignments; followers wait for it (parked).

From v5 (KIP-559) the member names the protocol type and name it believes the group uses; a
mismatch is INCONSISTENT_GROUP_PROTOCOL (23), and a successful answer carries both. A classic
member of a consumer group (KIP-848's migration) is answered by the consumer group: its assignment
as the coordinator computed it."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "assignment": b""}
    group = broker.groups.group(body.group_id)
    protocol_type, protocol_name = getattr(body, "protocol_type", None), getattr(body, "protocol_name", None)
    if group is not None and (
        (protocol_type is not None and protocol_type != group.protocol_type)
        or (protocol_name is not None and protocol_name != group.protocol_name)
    ):
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_group_protocol, "assignment": b""}
    assignments = {entry.member_id: entry.assignment for entry in body.assignments}
    result = broker.groups.sync(
        body.group_id,
        body.generation_id,
        body.member_id,
        assignments,
        getattr(body, "group_instance_id", None),
        protocol_type,
        protocol_name,
    )
    if isinstance(result, asyncio.Future):
        return _parked(broker, body.group_id, result)
    return _with_protocol(broker, body.group_id, result)


async def _parked(broker: BrokerContext, group_id: str, future: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
    return _with_protocol(broker, group_id, await future)


def _with_protocol(broker: BrokerContext, group_id: str, response: dict[str, Any]) -> dict[str, Any]:
    group = broker.groups.group(group_id)
    if response["error_code"] == ErrorCode.none and group is not None:
        response = {**response, "protocol_type": group.protocol_type, "protocol_name": group.protocol_name}
    return response
