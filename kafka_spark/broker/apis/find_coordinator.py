"""FindCoordinator (10): a group (key type 0) or transactional id (key type 1) is coordinated by the
leader of the key's partition of ``__consumer_offsets`` / ``__transaction_state``, as in Kafka (a
single node leads them all); COORDINATOR_NOT_AVAILABLE while it has none. The topic is created
through the controller on first use. From v4 (KIP-699) a request asks for many keys at once and is
answered per key. With an authorizer: DESCRIBE on the group (30) or transactional id (53)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

_KEY_TYPES = (0, 1)  # GROUP, TRANSACTION; 2 (SHARE, v6+) is for share groups, which this broker has not


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    key_type = getattr(body, "key_type", 0)
    error, message = ErrorCode.none, None
    if key_type not in _KEY_TYPES:
        error, message = (
            ErrorCode.invalid_request,
            f"key type {key_type} is not served; use 0 (group) or 1 (transaction)",
        )
    nowhere = {"node_id": -1, "host": "", "port": -1}

    def answer(key: str) -> dict[str, Any]:
        if error:
            return {"error_code": error, "error_message": message, **nowhere}
        resource, refused = (
            (access.GROUP, ErrorCode.group_authorization_failed)
            if key_type == 0
            else (access.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed)
        )
        if not access.allowed(broker, request, access.DESCRIBE, resource, key):
            return {"error_code": refused, "error_message": None, **nowhere}
        # The leader of the key's partition of the coordinators' topic (this node, on its own).
        code, node = broker.replicas.coordinator(OFFSETS_TOPIC if key_type == 0 else TRANSACTION_STATE_TOPIC, key)
        if node is None:
            return {"error_code": code, "error_message": None, **nowhere}
        return {"error_code": ErrorCode.none, "error_message": None, **node}

    if request.api_version >= 4:
        return {"throttle_time": 0, "coordinators": [{"key": key, **answer(key)} for key in body.coordinator_keys]}
    return {"throttle_time": 0, **answer(body.key)}
