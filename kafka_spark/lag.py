"""Consumer lag of a streaming query, as Spark's Kafka source reports it.

Spark's source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` into ``query.lastProgress["sources"][0]["metrics"]``: per partition the
latest offset the source saw minus the offset the batch read up to (``KafkaMicroBatchStream.metrics``).
A Python source cannot: PySpark's ``PythonMicroBatchStream`` (4.3) does not implement
``ReportsSourceMetrics``, so that map stays empty for pylog. It does carry the same two inputs:
``endOffset`` (what the batch read up to) and ``latestOffset`` (what the source saw, from its
``reportLatestOffset``), and :func:`lag_metrics` computes Spark's three figures from them, named and
formatted as Spark's. :class:`LagListener` does so for every batch of every query.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from kafka_spark.offsets import EPOCHS_KEY, START_KEY

__all__ = ["LagListener", "lag_metrics"]

log = logging.getLogger("kafka_spark")


def _as_dict(progress: Any) -> dict:
    if isinstance(progress, dict):
        return progress
    if hasattr(progress, "json"):  # pyspark.sql.streaming.listener.StreamingQueryProgress
        text = progress.json
        return json.loads(text() if callable(text) else text)
    raise TypeError(f"expected a streaming query progress (dict or StreamingQueryProgress), got {progress!r}")


def _offsets(value: Any) -> dict | None:
    """A source's offsets in query progress: Spark's JSON text, or, as PySpark 4.0 and 4.1 show a
    Python source's offsets in ``lastProgress``, the repr of a dict (read as a literal, never
    evaluated)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
    return value if isinstance(value, dict) else None


def _java_double(value: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else Java's scientific form (1.5E7)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(digits) + int(exponent) - 1}"


def lag_metrics(progress: Any, source: int = 0) -> dict[str, str]:
    """Spark's lag metrics of ``progress.sources[source]`` (a ``query.lastProgress`` dict, a
    listener's ``StreamingQueryProgress``, or its JSON as a dict): for each partition in
    ``latestOffset``, ``latest - endOffset``; their min, max and mean as Spark's strings
    (``{"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "40", "avgOffsetsBehindLatest":
    "13.333333333333334"}``). Empty, as Spark's map, when the source reported no latest offset.
    The leader epochs beside the offsets (``@leaderEpochs``), and the start a new query's first
    batch records on PySpark 4.0 and 4.1 (``@firstBatchStart``), are no partitions: left out."""
    sources = _as_dict(progress).get("sources") or []
    if source >= len(sources):
        return {}
    entry = sources[source]
    latest, end = _offsets(entry.get("latestOffset")), _offsets(entry.get("endOffset"))
    if not latest or end is None:
        return {}
    behind = [
        int(offset) - int(end.get(topic, {}).get(partition, 0))
        for topic, partitions in latest.items()
        if topic not in (EPOCHS_KEY, START_KEY)
        for partition, offset in partitions.items()
    ]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": _java_double(sum(behind) / len(behind)),
    }


def _listener_base() -> type:
    import kafka_spark.spark_env  # noqa: F401  (first: names a missing or doubled PySpark, and the fix)

    # isort: split
    from pyspark.sql.streaming import StreamingQueryListener

    return StreamingQueryListener


class LagListener(_listener_base()):  # type: ignore[misc]
    """A ``StreamingQueryListener`` that computes :func:`lag_metrics` for every progress event:
    logged at INFO (logger ``kafka_spark``), kept in its ``latest`` dict by query id, and passed to
    ``publish(query_id, batch_id, name, metrics)`` when given (e.g. to a metrics system).

    ``spark.streams.addListener(LagListener())``; events arrive asynchronously after each batch.
    """

    def __init__(
        self, publish: Callable[[str, int, str | None, dict[str, str]], None] | None = None, source: int = 0
    ) -> None:
        self.publish = publish
        self.source = source
        self.latest: dict[str, dict[str, str]] = {}

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = _as_dict(event.progress)
        metrics = lag_metrics(progress, self.source)
        if not metrics:
            return
        query_id = str(progress.get("id"))
        self.latest[query_id] = metrics
        log.info(
            "pylog lag: query %s batch %s: %s",
            progress.get("name") or query_id,
            progress.get("batchId"),
            ", ".join(f"{k}={v}" for k, v in metrics.items()),
        )
        if self.publish is not None:
            self.publish(query_id, int(progress.get("batchId", -1)), progress.get("name"), metrics)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
