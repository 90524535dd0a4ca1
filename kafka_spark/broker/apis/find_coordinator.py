"""FindCoordinator (10): this node coordinates every group (key type 0) and every
transactional id (key type 1)."""

from __future__ import annotations

from typing import Any

_INVALID_REQUEST = 42
_KEY_TYPES = (0, 1)  # GROUP, TRANSACTION; 2 (SHARE) needs v6+


def handle(broker: Any, request: Any) -> dict[str, Any]:
    key_type = getattr(request.body, "key_type", 0)
    if key_type not in _KEY_TYPES:
        return {"throttle_time": 0, "error_code": _INVALID_REQUEST,
                "error_message": f"key type {key_type} is not served; use 0 (group) or 1 (transaction)",
                "node_id": -1, "host": "", "port": -1}
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "node_id": broker.config.node_id, "host": broker.advertised_host, "port": broker.port}
