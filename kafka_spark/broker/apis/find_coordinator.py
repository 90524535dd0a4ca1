"""FindCoordinator (10): this node coordinates every group (key type 0) and every
transactional id (key type 1). From v4 (KIP-699) a request asks for many keys at once and is
answered per key."""

from __future__ import annotations

from typing import Any

_INVALID_REQUEST = 42
_KEY_TYPES = (0, 1)  # GROUP, TRANSACTION; 2 (SHARE, v6+) is for share groups, which this broker has not


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    key_type = getattr(body, "key_type", 0)
    error, message = 0, None
    if key_type not in _KEY_TYPES:
        error, message = _INVALID_REQUEST, f"key type {key_type} is not served; use 0 (group) or 1 (transaction)"
    found = {"node_id": broker.config.node_id, "host": broker.advertised_host, "port": broker.port} if not error \
        else {"node_id": -1, "host": "", "port": -1}
    if request.api_version >= 4:
        return {"throttle_time": 0, "coordinators": [
            {"key": key, "error_code": error, "error_message": message, **found} for key in body.coordinator_keys]}
    return {"throttle_time": 0, "error_code": error, "error_message": message, **found}
