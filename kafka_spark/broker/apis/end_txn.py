"""EndTxn (26), v0-5: commit or abort the ongoing transaction.

Writes a COMMIT/ABORT marker to every partition of the transaction, moves their last stable
offsets, commits staged consumer offsets (commit only) and wakes parked fetches; the response
waits until state and markers are durable. A retry after completion with the same outcome
succeeds; the opposite outcome, or no transaction, is 48 INVALID_TXN_STATE. Stale epoch: 47
(v0-1) / 90 (v2+), e.g. after the coordinator aborted a transaction that outlived its timeout.
v5+ is transaction protocol v2 (KIP-890): the epoch moves on with every EndTxn and the answer
carries the producer's new id and epoch.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.transaction_state import fenced_error

#: EndTxn v5+ is transaction protocol v2 (KIP-890): the epoch is bumped at every commit and abort.
TRANSACTION_V2_END_TXN = 5


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
    error, producer_id, producer_epoch = broker.transactions.end_txn(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        bool(body.committed),
        fenced_error(request.api_version, 2),
        transaction_v2=request.api_version >= TRANSACTION_V2_END_TXN,
    )
    return broker.transactions.respond(
        {"throttle_time": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": producer_epoch}
    )
