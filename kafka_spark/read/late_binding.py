"""Late binding of batch reads: ``earliest``, ``latest`` and timestamps are resolved at every
execution of a DataFrame, as Spark's Kafka relation does (SPARK-30656: a reused DataFrame sees
new records, and starts at the new log start after retention deleted the front).

Why the tasks resolve them: PySpark (4.3) plans a Python data source's batch read once per
DataFrame — ``PythonDataSourceV2`` keeps the partitions of the first execution for every later
one (``df.count()`` twice, ``df.union(df)``) — so the planned offsets cannot move. Each planned
input partition therefore carries a :class:`LateBound`: which bounds of its ranges came from a
position to resolve again, and the task resolves them when it runs:

* the first range of a topic-partition starts at the starting position resolved now; a later
  range of the same topic-partition (a ``minPartitions`` split) keeps its planned start, unless
  the resolved start lies past it (retention deleted the front);
* the last range of a topic-partition ends at the ending position resolved now; earlier ranges
  keep their planned ends;
* the *discovering* task (the first one) also reads every topic-partition the subscription has
  now that no planned range covers: partitions added since planning, and those that were empty.

Every resolved bound belongs to exactly one range, so the ranges of one execution never overlap.
Explicit offsets are fixed and cost nothing; the tasks that re-resolve use one pooled
``AdminClient`` per Python worker (:class:`kafka_spark.client.offset_reader.OffsetReader`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import PylogError
from kafka_spark.offsets import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetRange,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
)
from kafka_spark.read.start import starting_offsets

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.client.offset_reader import OffsetReader
    from kafka_spark.options import SourceOptions

__all__ = ["LateBound", "ResolvedStartAfterEnd", "current_ranges", "late_bound_partitions"]

log = logging.getLogger("kafka_spark")


class ResolvedStartAfterEnd(PylogError, ValueError):
    """A starting position resolved past the ending one (Spark's
    RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET)."""

    def __init__(self, tp: TopicPartition, start: int, end: int, options: SourceOptions):
        super().__init__(
            f"The resolved start offset {start} is greater than the resolved end offset {end} for topic "
            f"{tp.topic} partition {tp.partition} ({options.starting_option} / {options.ending_option}). The "
            f"start may be set past the log end (an offset, or a timestamp newer than the end), or the topic "
            f"was truncated or recreated."
        )


def moves(spec: OffsetSpec, tp: TopicPartition) -> bool:
    """Whether ``spec`` puts ``tp`` at a position that must be resolved again at each execution."""
    if isinstance(spec, (EarliestOffsets, LatestOffsets, GlobalTimestamp, SpecificTimestamps)):
        return True
    assert isinstance(spec, SpecificOffsets)
    return spec.expand([tp]).get(tp, 0) in (EARLIEST, LATEST)


@dataclass(frozen=True)
class LateBound:
    """What a task needs to re-resolve its ranges' moving bounds (picklable).

    ``starts`` / ``ends``: the planned first and last offset of each topic-partition of the task
    with a moving bound; ``moving_starts`` / ``moving_ends``: those whose start / end moves;
    ``known``: on the discovering task only, every topic-partition some planned range covers (the
    others it reads itself), else None.
    """

    options: SourceOptions
    bootstrap_servers: str
    starts: tuple[tuple[TopicPartition, int], ...]
    ends: tuple[tuple[TopicPartition, int], ...]
    moving_starts: frozenset[TopicPartition] = frozenset()
    moving_ends: frozenset[TopicPartition] = frozenset()
    known: tuple[TopicPartition, ...] | None = None


def late_bound_partitions(
    partitions: list,
    options: SourceOptions,
    bootstrap_servers: str,
    start: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
) -> list:
    """The planned input partitions of a batch read, each with its :class:`LateBound` (the
    first one discovering). ``start`` / ``end`` are the resolved positions they were planned
    from."""
    import dataclasses

    start_spec, end_spec = options.starting_for(streaming=False), options.ending_for_batch()
    if options.starting_offsets_from_output is not None:
        start_spec = SpecificOffsets({})  # the output's offsets are fixed
    known = tuple(sorted({r.topic_partition for p in partitions for r in p.ranges}))
    out = []
    for index, partition in enumerate(partitions):
        tps = sorted({r.topic_partition for r in partition.ranges})
        moving_starts = frozenset(tp for tp in tps if moves(start_spec, tp))
        moving_ends = frozenset(tp for tp in tps if moves(end_spec, tp))
        bound = sorted(moving_starts | moving_ends)
        late = LateBound(
            options,
            bootstrap_servers,
            starts=tuple((tp, start[tp]) for tp in bound),
            ends=tuple((tp, end[tp]) for tp in bound),
            moving_starts=moving_starts,
            moving_ends=moving_ends,
            known=known if index == 0 else None,
        )
        if bound or late.known is not None:
            partition = dataclasses.replace(partition, late=late)
        out.append(partition)
    return out


def _offset_reader(late: LateBound) -> OffsetReader:
    """This worker's OffsetReader for the cluster and client settings (kept across tasks)."""
    from kafka_spark.client.offset_reader import pooled_offset_reader

    return pooled_offset_reader(late.options, late.bootstrap_servers)


def current_ranges(ranges: tuple[OffsetRange, ...], late: LateBound) -> list[OffsetRange]:
    """The task's ranges with their moving bounds resolved now (see the module docstring)."""
    opts = late.options
    reader = _offset_reader(late)
    planned_start, planned_end = dict(late.starts), dict(late.ends)
    start_spec, end_spec = opts.starting_for(streaming=False), opts.ending_for_batch()
    start_now = _resolve(reader, start_spec, sorted(late.moving_starts), opts.starting_option, is_start=True)
    end_now = _resolve(reader, end_spec, sorted(late.moving_ends), opts.ending_option, is_start=False)
    out = []
    for r in ranges:
        tp, lo, hi = r.topic_partition, r.from_offset, r.until_offset
        if tp not in planned_start:  # nothing of it moves
            out.append(r)
            continue
        if tp in late.moving_starts and tp not in start_now or tp in late.moving_ends and tp not in end_now:
            log.warning("pylog source: %s no longer exists; this execution does not read it", tp)
            continue
        first = lo == planned_start[tp]
        if tp in start_now:
            lo = start_now[tp] if first else max(lo, start_now[tp])
        if tp in end_now and hi == planned_end[tp]:
            if lo > end_now[tp] and first:
                raise ResolvedStartAfterEnd(tp, lo, end_now[tp], opts)
            hi = end_now[tp]
        if lo < hi:
            out.append(OffsetRange(tp, lo, hi))
    if late.known is not None:
        out.extend(_discovered(reader, set(late.known)))
    return out


def _resolve(
    reader: OffsetReader, spec: OffsetSpec, tps: list[TopicPartition], option: str, *, is_start: bool
) -> dict[TopicPartition, int]:
    """``spec`` resolved for ``tps``, leaving out those that no longer exist (a deleted topic is
    not read, as Spark's subscription would no longer assign it)."""
    from kafka_spark.client.offset_reader import OffsetFetchError

    if not tps:
        return {}
    try:
        return reader.resolve_some(spec, tps, option=option, is_start=is_start)
    except OffsetFetchError:
        existing = reader.topic_partitions()
        left = [tp for tp in tps if tp in existing]
        if len(left) == len(tps):
            raise
        return _resolve(reader, spec, left, option, is_start=is_start)


def _discovered(reader: OffsetReader, known: set[TopicPartition]) -> list[OffsetRange]:
    """The whole ranges of the subscribed topic-partitions no planned range covers."""
    from kafka_spark.client.offset_reader import check_specified_partitions

    opts = reader.options
    now = reader.topic_partitions()
    new = sorted(now - known)
    if not new:
        return []
    start_spec, end_spec = opts.starting_for(streaming=False), opts.ending_for_batch()
    for spec, option in ((start_spec, opts.starting_option), (end_spec, opts.ending_option)):
        if isinstance(spec, (SpecificOffsets, SpecificTimestamps)):
            check_specified_partitions(spec, now, option)  # Spark fails when partitions appeared
    if opts.starting_offsets_from_output is not None:  # the output's offsets, else earliest
        start = starting_offsets(reader, new, streaming=False)
    else:
        start = reader.resolve_some(start_spec, new, option=opts.starting_option, is_start=True)
    end = reader.resolve_some(end_spec, new, option=opts.ending_option, is_start=False)
    ranges = []
    for tp in new:
        if start[tp] > end[tp]:
            raise ResolvedStartAfterEnd(tp, start[tp], end[tp], opts)
        if start[tp] < end[tp]:
            ranges.append(OffsetRange(tp, start[tp], end[tp]))
    if ranges:
        log.info("pylog source: this execution also reads %s", ", ".join(map(str, ranges)))
    return ranges
