"""JoinGroup (11): parked until the rebalance completes (a coroutine mutes only this connection).

From v4 a new dynamic member is first answered 79 MEMBER_ID_REQUIRED with the id to join with, as
Kafka answers it; from v9 a static leader back in a Stable group may be told to skip assigning.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.group_authorization_failed,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": "",
            "leader": "",
            "member_id": body.member_id,
            "members": [],
        }
    result = broker.groups.join(
        body.group_id,
        body.member_id,
        client_id=request.client_id or "",
        client_host=request.client_host,  # "/127.0.0.1", as Kafka spells the peer
        session_timeout_ms=_millis(body.session_timeout),
        rebalance_timeout_ms=_millis(getattr(body, "rebalance_timeout", None)),  # v1+
        protocol_type=body.protocol_type,
        protocols=[(protocol.name, protocol.metadata) for protocol in body.protocols],
        group_instance_id=getattr(body, "group_instance_id", None),  # v5+: static membership (KIP-345)
        require_member_id=request.api_version >= 4,  # KIP-394
        skip_assignment=request.api_version >= 9,  # KIP-814
    )
    if isinstance(result, asyncio.Future):
        return _parked(result)
    return result


async def _parked(future: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
    return await future


def _millis(value: datetime.timedelta | int | None) -> int:
    """kio durations are timedeltas; -1 when the version has no such field."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)
