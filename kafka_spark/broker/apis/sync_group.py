"""SyncGroup (14): the leader hands out assignments; followers wait for it (parked)."""

from __future__ import annotations

import asyncio
from typing import Any


def handle(broker: Any, request: Any) -> Any:
    body = request.body
    assignments = {entry.member_id: entry.assignment for entry in body.assignments}
    result = broker.groups.sync(body.group_id, body.generation_id, body.member_id, assignments)
    if isinstance(result, asyncio.Future):
        return _parked(result)
    return result


async def _parked(future: "asyncio.Future[dict[str, Any]]") -> dict[str, Any]:
    return await future
