"""ConsumerGroupHeartbeat (68, v0-1): a member of a KIP-848 consumer group (``group.protocol=consumer``)
joins, heartbeats and leaves; the coordinator answers with its epoch and assignment
(coordinator/consumer_group.py). v0 has the coordinator name a joining member; v1 members name
themselves. With an authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED), and DESCRIBE on the
topics a member subscribes to by name (TOPIC_AUTHORIZATION_FAILED); topics a regular expression
matches are left out of the subscription when the member may not DESCRIBE them. A heartbeat that
changed the group is answered once the records of the change are written (fsynced where the topic
flushes on acks=all, and on the in-sync replicas), as Kafka answers: NOT_COORDINATOR when they did
not reach the replicas, KAFKA_STORAGE_ERROR when they could not be written.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.context import answer_after
from kafka_spark.broker.deferred import Deferred


def handle(broker: BrokerContext, request: Any) -> dict[str, Any] | Deferred:
    body = request.body
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        code: Any = ErrorCode.group_authorization_failed
        message: str | None = f"not authorized to READ group {body.group_id!r}"
    else:
        code, message = broker.groups.owner_error(body.group_id), None
    if code:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": message,
            "member_id": body.member_id or None,
            "member_epoch": body.member_epoch,
            "heartbeat_interval": 0,
            "assignment": None,
        }
    response, stored = broker.groups.consumer_heartbeat(
        body,
        request.client_id or "",
        request.client_host,
        lambda topic: access.allowed(broker, request, access.DESCRIBE, access.TOPIC, topic),
    )
    if stored is None:
        return response
    return Deferred(answer_after([asyncio.ensure_future(stored)], response, f"group {body.group_id}'s membership"))
