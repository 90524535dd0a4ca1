"""ListTransactions (66, v0-2; kafka-transactions list, AdminClient.listTransactions): the
transactional ids the coordinator knows, with producer id and state, filtered by state, producer
id, (v1) running longer than ``duration_filter`` ms and (v2) id matching a regular expression.
States the broker does not know are answered in ``unknown_state_filters``. With an authorizer,
only the ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

import re
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext

_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    states = set(body.state_filters)
    producer_ids = set(body.producer_id_filters)
    duration = getattr(body, "duration_filter", -1)
    response: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "unknown_state_filters": sorted(states - set(_STATES)),
        "transaction_states": [],
    }
    pattern = getattr(body, "transactional_id_pattern", None)
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return {**response, "error_code": ErrorCode.invalid_regular_expression}
    now = int(time.time() * 1000)
    for meta in broker.transactions.all():
        if states and meta.state.value not in states:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        if duration >= 0 and (meta.txn_start_ms < 0 or now - meta.txn_start_ms <= duration):
            continue
        if matcher is not None and not matcher.fullmatch(meta.transactional_id):
            continue
        if not access.allowed(broker, request, access.DESCRIBE, access.TRANSACTIONAL_ID, meta.transactional_id):
            continue
        response["transaction_states"].append(
            {
                "transactional_id": meta.transactional_id,
                "producer_id": meta.producer_id,
                "transaction_state": meta.state.value,
            }
        )
    return response
