"""DeleteGroups (42), v0-3: delete groups that have no members, with their committed offsets.

Per group, as Kafka: 68 NON_EMPTY_GROUP while members remain; 69 GROUP_ID_NOT_FOUND for a group
with neither members nor committed offsets; 56 KAFKA_STORAGE_ERROR when the tombstones cannot be
written or fsynced. The offsets are tombstoned in ``__consumer_offsets``, so a deleted group stays
deleted across restarts; the response waits (without holding up the connection) for that fsync,
as OffsetCommit's does. v3 says why in ``error_message``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.coordinator.group import write_error_code
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.storage.errors import StorageError

logger = logging.getLogger("kafka_spark.broker.coordinator.group")

_MESSAGES: dict[int, str] = {
    ErrorCode.non_empty_group: "The group {} is not empty: its members must leave (or expire) first.",
    ErrorCode.group_id_not_found: "Group {} not found.",
}


def handle(broker: BrokerContext, request: Any) -> Any:
    coordinator = broker.groups
    results: list[dict[str, Any]] = []
    waits: list[tuple[dict[str, Any], Awaitable[None]]] = []
    for group_id in dict.fromkeys(request.body.groups_names):  # a name asked twice is answered once
        result = {"group_id": group_id, "error_code": ErrorCode.none}
        if not access.allowed(broker, request, access.DELETE, access.GROUP, group_id):
            result["error_code"] = ErrorCode.group_authorization_failed
            results.append(result)
            continue
        try:
            code, durable = coordinator.delete_group(group_id)
            result["error_code"] = int(code)
            result["error_message"] = _MESSAGES.get(int(code), "").format(group_id) or None
            if durable is not None:
                waits.append((result, durable))
        except StorageError as error:
            logger.error("deleting group %s failed: %s", group_id, error)
            result["error_code"] = ErrorCode.kafka_storage_error
            result["error_message"] = str(error)
        results.append(result)
    response = {"throttle_time": 0, "results": results}
    if not waits:
        return response
    return Deferred(_after(waits, response))


async def _after(waits: list[tuple[dict[str, Any], Awaitable[None]]], response: dict[str, Any]) -> dict[str, Any]:
    for result, durable in waits:
        try:
            await durable
        except StorageError as error:
            logger.error("group %s's tombstones not stored: %s", result["group_id"], error)
            result["error_code"] = write_error_code(error)
    return response
