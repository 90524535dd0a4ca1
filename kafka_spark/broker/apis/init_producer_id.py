"""InitProducerId (22): producer ids for idempotent producers.

Transactional ids are refused until the transaction coordinator exists (the transaction APIs
are not advertised, so librdkafka and kafka-python refuse transactional producers up front).
"""

from __future__ import annotations

from typing import Any

_INVALID_REQUEST = 42


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    if body.transactional_id is not None:
        return {"throttle_time": 0, "error_code": _INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    producer_id = getattr(body, "producer_id", -1)
    producer_epoch = getattr(body, "producer_epoch", -1)
    if producer_id >= 0 and producer_epoch >= 0:
        # KIP-360: an idempotent producer bumps its own epoch after an error; the new epoch
        # restarts its sequences at 0 on every partition.
        return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": producer_epoch + 1}
    return {"throttle_time": 0, "error_code": 0, "producer_id": broker.producer_ids.next_id(), "producer_epoch": 0}
