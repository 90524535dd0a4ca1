"""DescribeTransactions (65, v0; kafka-transactions describe, AdminClient.describeTransactions):
the state of transactional ids as the transaction coordinator holds them.

Per id: its state (Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
CompleteAbort), timeout, the start of the ongoing transaction (-1 for none), producer id and epoch
and the partitions in the transaction; TRANSACTIONAL_ID_NOT_FOUND (105) for an id the coordinator
does not know. With an authorizer: DESCRIBE on the transactional id (53), and the partitions of
topics the principal may not DESCRIBE left out, as Kafka does.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    states = []
    for transactional_id in request.body.transactional_ids:
        state: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": _EPOCH,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        meta = broker.transactions.get(transactional_id)
        owner = broker.transactions.owner_error(transactional_id)
        if not access.allowed(broker, request, access.DESCRIBE, access.TRANSACTIONAL_ID, transactional_id):
            state["error_code"] = ErrorCode.transactional_id_authorization_failed
        elif owner:  # on a cluster: another broker coordinates it
            state["error_code"] = owner
        elif meta is None:
            state["error_code"] = ErrorCode.transactional_id_not_found
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(meta.partitions):
                if access.allowed(broker, request, access.DESCRIBE, access.TOPIC, tp.topic):
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
            state.update(
                transaction_state=meta.state.value,
                transaction_timeout=meta.timeout_ms,
                transaction_start_time=_EPOCH + datetime.timedelta(milliseconds=meta.txn_start_ms),
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()],
            )
        states.append(state)
    return {"throttle_time": 0, "transaction_states": states}
