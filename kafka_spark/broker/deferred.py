"""Deferred: a response whose content is decided but which may not be sent yet."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deferred:
    """Returned by a handler whose side effects are done (e.g. records appended) but whose
    response must wait (e.g. for an fsync). Unlike a handler that is itself a coroutine (a
    long-polling Fetch), a Deferred does not hold up the next requests on the connection, so
    pipelined produces are appended while earlier ones wait for the disk; responses still go
    out in request order."""

    response: Awaitable[Any]
