"""AddOffsetsToTxn (25), v0-4: a consumer group's offsets join the ongoing transaction.

The client then sends TxnOffsetCommit with the offsets; they become visible to OffsetFetch when
the transaction commits. Errors: 49, 47 (v0-1) / 90 (v2+), 51 as for AddPartitionsToTxn; with an
authorizer, WRITE on the transactional id (53) and READ on the group (30). (Transaction protocol
v2 clients skip it: TxnOffsetCommit v5+ adds the group itself.)
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.transaction_state import fenced_error


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    if not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
    if not access.allowed(broker, request, access.READ, access.GROUP, body.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    error = broker.transactions.add_offsets(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        body.group_id,
        fenced_error(request.api_version, 2),
    )
    return broker.transactions.respond({"throttle_time": 0, "error_code": error})
