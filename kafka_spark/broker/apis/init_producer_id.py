"""InitProducerId (22): producer ids and epochs for idempotent and transactional producers.

Without a transactional id (idempotent producer) every call gets a fresh producer id at epoch 0,
as Kafka does, also for the KIP-360 "bump" an idempotent producer asks for after an error (it
then restarts its sequences under the new id). With one, the transaction coordinator decides
(coordinator/transaction.py): a new id gets a new producer id, a known one is fenced forward (epoch + 1,
ongoing transaction aborted); 50 INVALID_TRANSACTION_TIMEOUT for a timeout outside (0, 900000];
47, or 90 PRODUCER_FENCED from v4, when a v3+ bump names a stale producer id or epoch. With an
authorizer: WRITE on the transactional id (53), or for an idempotent producer IDEMPOTENT_WRITE on
the cluster or WRITE on some topic (31, KIP-679).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> Any:
    body = request.body
    refused = {"throttle_time": 0, "producer_id": -1, "producer_epoch": -1}
    if body.transactional_id is None:
        # Kafka 3+ (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        if not (
            access.allowed_on_cluster(broker, request, access.IDEMPOTENT_WRITE)
            or access.allowed_on_any(broker, request, access.WRITE, access.TOPIC)
        ):
            return {**refused, "error_code": ErrorCode.cluster_authorization_failed}
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "producer_id": broker.producer_ids.next_id(),
            "producer_epoch": 0,
        }
    if not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, body.transactional_id):
        return {**refused, "error_code": ErrorCode.transactional_id_authorization_failed}
    timeout_ms = int(body.transaction_timeout.total_seconds() * 1000)
    error, producer_id, producer_epoch = broker.transactions.init_producer_id(
        body.transactional_id,
        timeout_ms,
        getattr(body, "producer_id", -1),
        getattr(body, "producer_epoch", -1),
        request.api_version,
    )
    response = {"throttle_time": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": producer_epoch}
    return broker.transactions.respond(response)
