"""Offset values, Spark-compatible offset JSON, start/end specs, the per-trigger rate limit,
offset ranges and the data-loss rules.

Everything here is pure: no Kafka client, no Spark, no clock.

Offset JSON
-----------
The format of Spark's Kafka source (``JsonUtils.partitionOffsets``), used for the
``startingOffsets`` / ``endingOffsets`` options and for the offsets a streaming query checkpoints::

    {"orders":{"0":23,"1":-1},"payments":{"0":-2}}

Partition ids are JSON string keys; each value is the **next offset to read** (one past the last
record read, like ``KafkaConsumer.position()``); in options ``-2`` means earliest and ``-1`` means
latest. :func:`offsets_to_json` writes it compactly, topics sorted, partitions sorted numerically
(Spark sorts topic-partitions "for more determinism"; JSON object order carries no meaning, so
files written by either side parse on the other).

Streaming offsets travel between the JVM and the Python planner as dicts of the same shape
(:func:`offsets_to_dict` / :func:`offsets_from_dict`), always in that sorted order so that the
JSON PySpark writes into the checkpoint's offset log is the same for the same offsets.

Leader epochs in checkpointed offsets
-------------------------------------
The offsets a streaming query checkpoints also carry, per partition where the broker reported
one, the leader epoch that went with the offset (KIP-320), under one extra top-level key,
:data:`EPOCHS_KEY` (``"@leaderEpochs"``), whose value has the offsets' own shape::

    {"orders":{"0":23,"1":7},"@leaderEpochs":{"orders":{"0":4,"1":4}}}

``@`` cannot occur in a Kafka topic name (``[a-zA-Z0-9._-]``), so the key never collides with a
topic. :func:`positions_to_dict` / :func:`positions_from_dict` write and read it; offsets
without it (Spark's, and pylog's before epochs) read as positions without epochs, which are not
validated. Spark's own Kafka source cannot read a checkpoint that holds the key (it takes every
top-level key for a topic). Options (``startingOffsets``, ``endingOffsets``) never take epochs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import DataLossError, KafkaReadError, OffsetJsonError

__all__ = [
    "EARLIEST",
    "LATEST",
    "DataLossError",
    "EarliestOffsets",
    "GlobalTimestamp",
    "LatestOffsets",
    "OffsetJsonError",
    "OffsetRange",
    "OffsetSpec",
    "EPOCHS_KEY",
    "START_KEY",
    "PartitionEpochs",
    "PartitionOffsets",
    "SpecificOffsets",
    "SpecificTimestamps",
    "offsets_from_dict",
    "offsets_from_json",
    "offset_spec_from_json",
    "offsets_to_dict",
    "offsets_to_json",
    "out_of_range_position",
    "partitions_from_json",
    "first_batch_start",
    "positions_from_dict",
    "positions_to_dict",
    "rate_limit",
    "report_data_loss",
    "new_offset_count",
]

#: Sentinel for "the earliest available offset" in offset JSON (Spark's KafkaOffsetRangeLimit).
EARLIEST = -2
#: Sentinel for "the latest offset" (the log end, or the LSO under read_committed).
LATEST = -1

_LONG_MAX = 2**63 - 1

#: A concrete offset per topic-partition: the next offset to read.
PartitionOffsets = dict[TopicPartition, int]

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


_FAIL_ADVICE = (
    "Some data may have been lost because it is not available in the log any more: either it was "
    "aged out by retention or the topic was deleted or recreated before all of it was processed. "
    "If you want the query to skip missing offsets and go on (with a warning), set the source "
    "option failOnDataLoss=false to skip."
)
_WARN_ADVICE = (
    "Some data may have been lost; skipping it because failOnDataLoss=false. Set "
    "failOnDataLoss=true to fail the query instead."
)


def report_data_loss(message: str, fail_on_data_loss: bool, logger: Any = None) -> None:
    """Raise :class:`DataLossError` (``failOnDataLoss=true``) or log a warning (``false``)."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {_FAIL_ADVICE}")
    import logging

    (logger or logging.getLogger("kafka_spark")).warning("%s. %s", message, _WARN_ADVICE)


# --------------------------------------------------------------------------------------------
# Specs: where a read starts or ends, as the user wrote it (resolved later against the broker)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EarliestOffsets:
    """``earliest``: the log start offset of every partition."""


@dataclass(frozen=True)
class LatestOffsets:
    """``latest``: the log end offset (LSO under ``read_committed``) of every partition."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Offset JSON: an offset (or -2/-1 sentinel) per topic-partition, and, for topics given a
    whole-topic ``"earliest"`` / ``"latest"`` (``{"topicA":"earliest","topicB":{"0":23}}``,
    SPARK-58774), -2/-1 per topic in ``topics``: every partition the topic has when the spec is
    resolved."""

    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    topics: Mapping[str, int] = field(default_factory=dict)

    def expand(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The per-partition offsets, whole-topic entries expanded over those of ``tps``."""
        expanded = {tp: self.topics[tp.topic] for tp in tps if tp.topic in self.topics}
        return {**expanded, **self.offsets}


@dataclass(frozen=True)
class SpecificTimestamps:
    """``...OffsetsByTimestamp``: a timestamp (ms) per topic-partition; the offset is the first
    one whose record timestamp is >= it (Kafka's ``offsetsForTimes``)."""

    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class GlobalTimestamp:
    """``startingTimestamp`` / ``endingTimestamp``: one timestamp (ms) for every partition."""

    timestamp: int


#: The closed set of start/end specs.
OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | SpecificTimestamps | GlobalTimestamp


# --------------------------------------------------------------------------------------------
# JSON codec
# --------------------------------------------------------------------------------------------


def _sorted_items(offsets: Mapping[TopicPartition, int]) -> list[tuple[TopicPartition, int]]:
    return sorted(offsets.items(), key=lambda item: (item[0].topic, item[0].partition))


def offsets_to_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{TopicPartition("orders", 0): 23}`` -> ``{"orders": {"0": 23}}``, sorted by (topic,
    numeric partition); insertion order is the sort order, so ``json.dumps`` is deterministic."""
    out: dict[str, dict[str, int]] = {}
    for tp, offset in _sorted_items(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Spark's offset JSON, compact: ``{"orders":{"0":23,"1":-1}}``."""
    return json.dumps(offsets_to_dict(offsets), separators=(",", ":"))


#: The top-level key of checkpointed offsets under which the leader epochs go (module docstring).
EPOCHS_KEY = "@leaderEpochs"

#: The top-level key under which, without admission control (PySpark before 4.2), a new query's
#: first batch records in its end offsets where it starts (kafka_spark.read.stream). Like
#: :data:`EPOCHS_KEY`, it cannot collide with a topic.
START_KEY = "@firstBatchStart"

#: A leader epoch per topic-partition, where one is known.
PartitionEpochs = dict[TopicPartition, int]


def positions_to_dict(offsets: Mapping[TopicPartition, int], epochs: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """:func:`offsets_to_dict` plus, under :data:`EPOCHS_KEY`, the known (>= 0) leader epochs of
    those partitions; no key at all when none is known."""
    out: dict[str, Any] = dict(offsets_to_dict(offsets))
    known = {tp: epoch for tp, epoch in epochs.items() if tp in offsets and epoch >= 0}
    if known:
        out[EPOCHS_KEY] = offsets_to_dict(known)
    return out


def positions_from_dict(data: Any) -> tuple[PartitionOffsets, PartitionEpochs]:
    """Inverse of :func:`positions_to_dict`: ``(offsets, epochs)``; offsets without
    :data:`EPOCHS_KEY` have no epochs. Epochs of partitions without an offset are dropped; a
    recorded first-batch start (:data:`START_KEY`) is not a position and is left out."""
    if isinstance(data, dict) and START_KEY in data:
        data = {key: value for key, value in data.items() if key != START_KEY}
    if isinstance(data, dict) and EPOCHS_KEY in data:
        rest = {topic: value for topic, value in data.items() if topic != EPOCHS_KEY}
        offsets = offsets_from_dict(rest)
        raw = data[EPOCHS_KEY]
        example = '{"orders":{"0":23},"' + EPOCHS_KEY + '":{"orders":{"0":4}}}'
        epochs = offsets_from_dict(raw, source_text=json.dumps(data), example=example)
        return offsets, {tp: epoch for tp, epoch in epochs.items() if tp in offsets and epoch >= 0}
    return offsets_from_dict(data), {}


def first_batch_start(data: Any) -> dict[str, Any] | None:
    """The start a first batch recorded in its end offsets (:data:`START_KEY`), as the offset
    dict it was (offsets and epochs), or None."""
    if isinstance(data, dict) and isinstance(data.get(START_KEY), dict):
        return data[START_KEY]
    return None


def _int_value(value: Any) -> int | None:
    # bool is an int in Python but not a JSON number Spark would accept as a Long.
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def offsets_from_dict(
    data: Any, *, source_text: str | None = None, example: str = _OFFSETS_EXAMPLE
) -> PartitionOffsets:
    """Inverse of :func:`offsets_to_dict`; raises :class:`OffsetJsonError` quoting Spark's
    expected shape (``Expected e.g. {...}, got ...``) for anything else."""

    def bad() -> OffsetJsonError:
        got = source_text if source_text is not None else json.dumps(data)
        return OffsetJsonError(f"Expected e.g. {example}, got {got}")

    if not isinstance(data, dict):
        raise bad()
    out: PartitionOffsets = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise bad()
        for partition, value in partitions.items():
            try:
                p = int(partition)
            except (TypeError, ValueError):
                raise bad() from None
            v = _int_value(value)
            if v is None:
                raise bad()
            out[TopicPartition(topic, p)] = v
    return out


def offsets_from_json(text: str, *, example: str = _OFFSETS_EXAMPLE) -> PartitionOffsets:
    """Parse Spark's offset JSON (also used for per-partition timestamps)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        raise OffsetJsonError(f"Expected e.g. {example}, got {text}") from None
    return offsets_from_dict(data, source_text=text, example=example)


_SPEC_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":"earliest"}'


def offset_spec_from_json(text: str) -> SpecificOffsets:
    """Parse ``startingOffsets`` / ``endingOffsets`` JSON: per topic either ``{"0":23,...}``
    (-2 earliest, -1 latest) or, for the whole topic, ``"earliest"`` / ``"latest"``."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise OffsetJsonError(f"Expected e.g. {_SPEC_EXAMPLE}, got {text}")
    topics: dict[str, int] = {}
    per_partition: dict[str, Any] = {}
    for topic, value in data.items():
        if isinstance(value, str):
            position = {"earliest": EARLIEST, "latest": LATEST}.get(value.strip().lower())
            if position is None:
                raise OffsetJsonError(
                    f"Expected e.g. {_SPEC_EXAMPLE}: a topic's value is 'earliest', 'latest' or its "
                    f"partitions' offsets; got {json.dumps(value)} for topic {topic!r}"
                )
            topics[topic] = position
        else:
            per_partition[topic] = value
    offsets = offsets_from_dict(per_partition, source_text=text, example=_SPEC_EXAMPLE)
    return SpecificOffsets(offsets, topics)


def partitions_from_json(text: str) -> list[TopicPartition]:
    """Parse the ``assign`` option, ``{"topicA":[0,1],"topicB":[2,4]}``, sorted."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise OffsetJsonError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}")
    out: set[TopicPartition] = set()
    for topic, partitions in data.items():
        if not isinstance(partitions, list):
            raise OffsetJsonError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}")
        for partition in partitions:
            p = _int_value(partition)
            if p is None or p < 0:
                raise OffsetJsonError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}")
            out.add(TopicPartition(topic, p))
    return sorted(out)


# --------------------------------------------------------------------------------------------
# Admission control
# --------------------------------------------------------------------------------------------


def rate_limit(
    limit: int,
    from_offsets: Mapping[TopicPartition, int],
    until_offsets: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int] | None = None,
) -> PartitionOffsets:
    """Spark's ``KafkaMicroBatchStream.rateLimit``: spread ``limit`` offsets over partitions in
    proportion to their backlog.

    For each partition of ``until_offsets`` (the latest offsets), the backlog is ``until - from``,
    where ``from`` comes from ``from_offsets`` or, for a partition new since the last batch, from
    ``earliest_of_new``. Partitions with a positive backlog get ``limit * backlog / total``
    offsets, floored, except that a share below 1 is rounded **up** "to not starve small
    partitions" (so a batch may exceed ``limit`` by up to one offset per partition, as in Spark).
    Each result is capped at the partition's ``until`` (and at 2**63-1, Spark's overflow guard).
    Partitions with no backlog, or whose start is unknown, keep their ``until`` offset. If the
    total backlog is below 1, ``until_offsets`` is returned unchanged.
    """
    earliest_of_new = earliest_of_new or {}
    sizes: dict[TopicPartition, int] = {}
    for tp, end in until_offsets.items():
        begin = from_offsets.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    # Spark computes with doubles (size / total as Double); keep the same arithmetic so the
    # same backlog gives the same batch boundaries.
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until_offsets)
    out: PartitionOffsets = {}
    for tp, end in until_offsets.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = from_offsets[tp] if tp in from_offsets else earliest_of_new[tp]
        prorate = limit * (size / total)
        prorate_long = int(math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        off = _LONG_MAX if prorate_long > _LONG_MAX - begin else begin + prorate_long
        out[tp] = min(end, off)
    return out


def new_offset_count(from_offsets: Mapping[TopicPartition, int], latest_offsets: Mapping[TopicPartition, int]) -> int:
    """Offsets available past ``from_offsets``, summed over partitions (``minOffsetsPerTrigger``).

    As Spark's ``delayBatch``, a partition missing from ``from_offsets`` counts from 0.
    """
    return sum(end - from_offsets.get(tp, 0) for tp, end in latest_offsets.items())


def sorted_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Topic-partitions in (topic, partition) order."""
    return sorted(tps, key=lambda tp: (tp.topic, tp.partition))


# Offset ranges: what one read covers, and where a read goes on when offsets are out of range


@dataclass(frozen=True)
class OffsetRange:
    """The offsets ``[from_offset, until_offset)`` of one topic-partition: one read.

    ``until_offset`` is exclusive (the next offset to read after this range), as in Spark's
    ``KafkaOffsetRange``. A hashable value; :func:`plan_tasks` orders ranges by (topic,
    partition, from_offset).
    """

    topic_partition: TopicPartition
    from_offset: int
    until_offset: int

    def __post_init__(self) -> None:
        if not isinstance(self.topic_partition, TopicPartition):
            raise TypeError(
                f"OffsetRange.topic_partition must be a TopicPartition, got "
                f"{self.topic_partition!r}; build it with TopicPartition(topic, partition)"
            )

    @property
    def size(self) -> int:
        """``until_offset - from_offset``: an estimate of the record count (compaction and
        transaction markers leave gaps), as Spark's ``KafkaOffsetRange.size``."""
        return self.until_offset - self.from_offset

    def __str__(self) -> str:
        return f"{self.topic_partition}[{self.from_offset}, {self.until_offset})"


def out_of_range_position(
    tp: TopicPartition,
    position: int,
    until: int,
    low: int,
    high: int,
    error: str,
    lose: Callable[[str], None],
    retries: int,
) -> int | None:
    """Where a read continues after the broker said ``position`` is out of range, the log now
    holding ``[low, high)``: past the deleted offsets (reported as loss through ``lose``), at
    ``until`` when the range lies past the log end, or None when ``position`` is in range again
    (e.g. the topic was recreated meanwhile: retry, as Spark does, up to 3 ``retries``)."""
    if position < low:
        skip_to = min(low, until)
        lose(f"{tp}: offsets [{position}, {skip_to}) were deleted (the log start offset is now {low}; {error})")
        return skip_to
    if position >= high:
        lose(f"{tp}: offsets [{position}, {until}) are past the log end offset {high} ({error})")
        return until
    if retries >= 3:
        raise KafkaReadError(
            f"offset {position} of {tp} keeps being reported out of range although the log holds "
            f"[{low}, {high}): {error}"
        )
    return None
