"""librdkafka's log, through Python logging and rate-limited.

Left alone, librdkafka prints every event to stderr itself: a cluster that is down yields a
``FAIL ... Connection refused`` line per reconnect per client, thousands in a query that
retries. :func:`routed` gives a client config confluent-kafka's ``logger`` setting, so the lines
go to the Python logger ``kafka_spark.librdkafka`` (configure it like any other) through a
filter that lets a handful of each kind through per minute, the next one saying how many were
left out.

confluent-kafka hands a client's log lines to Python when the client is polled (``poll``,
``flush``, ``consume``), in the polling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kafka_spark.client.token_provider import with_token_callback

#: Lines of one kind (librdkafka facility and level, e.g. FAIL at ERROR) let through per window.
BURST = 3
#: The window, in seconds.
WINDOW_S = 60.0


class RateLimit(logging.Filter):
    """At most ``burst`` records of each kind per ``window_s``; the first record of a later
    window says how many of its kind were suppressed before it. Thread-safe."""

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._lock = threading.Lock()
        # kind -> [window start, records passed in the window, records suppressed]
        self._kinds: dict[tuple[int, str], list[Any]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        kind = (record.levelno, str(args[0]) if args else str(record.msg)[:40])
        now = time.monotonic()
        with self._lock:
            state = self._kinds.setdefault(kind, [now, 0, 0])
            if now - state[0] >= self.window_s:
                state[0], state[1] = now, 0
            if state[1] >= self.burst:
                state[2] += 1
                return False
            state[1] += 1
            suppressed, state[2] = state[2], 0
        if suppressed:
            record.msg = f"{record.msg} (%d similar librdkafka messages suppressed)"
            record.args = (*args, suppressed)
        return True


LOGGER = logging.getLogger("kafka_spark.librdkafka")
LOGGER.addFilter(RateLimit())


def routed(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` ready for a confluent-kafka client (give it to every client): librdkafka's log
    going to :data:`LOGGER`, and a token function's reference replaced by its token callback
    (kafka_spark.client.token_provider, which asks for the first token now)."""
    return {**with_token_callback(config), "logger": LOGGER}
