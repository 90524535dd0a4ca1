"""Planning: a batch's offset ranges -> Spark's input partitions (the driver's range calculator).

Runs in Spark's planner worker on the driver. Pure and deterministic: no Kafka client, no clock,
no randomness, and neither numba nor pyarrow.compute nor confluent_kafka is imported (an
import-linter contract in setup.cfg and tests/test_layout_imports.py keep it so, since Spark's
Python workers import this on every lookup): the same ranges and options always give the same
partitions, which is what makes a replayed micro-batch read the records it read the first time.

:func:`plan_input_partitions` (and :func:`plan_for_options`, with a SourceOptions) turns the
ranges into :class:`KafkaInputPartition` s in one of two ways.

**By work (the default).** Spark's Kafka source makes a task per topic-partition range:
``minPartitions`` splits large ranges to reach a minimum task count and
``maxRecordsPerPartition`` caps a range's size, but small ranges are never grouped. With many
partitions and few records each, per-task overhead (task scheduling, a Python worker round trip,
a fetch session) dominates: the same 1,000,000 rows read at 1.10 M rows/s from one partition and
0.30 M rows/s from 64. Without any of ``minPartitions``, ``maxRecordsPerPartition`` and
``maxPartitions``, pylog plans by work instead (:func:`plan_by_work`): the ranges, laid end to
end in (topic, partition, from_offset) order, are cut into ``ceil(records /``
:data:`RECORDS_PER_TASK` ``)`` equal shares, a task each. So a 1,000,000-row batch becomes 5
tasks of 200,000 records whether it comes from 1 partition, 8 or 1,000. (Grouping whole ranges
up to the limit instead made 8 tasks of 8 partitions of 125,000 records, and a sixth, nearly
empty one of 64 to 1,000 small partitions: a task costs ~0.03 s of a core's wall time.)

**Spark's way**, with any of those options: :func:`split_ranges` is Spark's
``KafkaOffsetRangeCalculator.getRanges`` (``minPartitions``, ``maxRecordsPerPartition``: more
tasks than ranges), then :func:`plan_tasks` deals the ranges to at most ``maxPartitions`` tasks
with Kafka's assignors (kafka_spark.assignment, whose docstring shows the task layout).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from kafka_spark.assignment import AssignmentError, _assignor, _java_order
from kafka_spark.offsets import OffsetRange
from kafka_spark.options import SourceOptions, secured_connection

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.client.config import ConfigKey

__all__ = [
    "RECORDS_PER_TASK",
    "KafkaInputPartition",
    "plan_by_work",
    "plan_for_options",
    "plan_input_partitions",
    "plan_tasks",
    "resolve_fetcher",
    "split_ranges",
    "task_member_ids",
]

#: The records one task reads when planning by work. At about 0.5 M rows/s per core that is
#: ~0.4 s of reading, well above the ~0.05-0.1 s a task costs on its own, while a million rows
#: still make five tasks to spread over executors.
RECORDS_PER_TASK = 200_000


def plan_by_work(
    ranges: Sequence[OffsetRange], records_per_task: int = RECORDS_PER_TASK
) -> list[tuple[OffsetRange, ...]]:
    """Tasks (tuples of ranges) of equal work: ``ceil(total / records_per_task)`` of them.

    Empty ranges are dropped; the others, in (topic, partition, from_offset) order, are laid end
    to end and cut into ``n = ceil(total / records_per_task)`` consecutive shares of
    ``total // n`` or ``total // n + 1`` records (the larger ones last): task ``k`` reads records
    ``[k * total // n, (k + 1) * total // n)`` of that sequence. A range that crosses a share's
    end is cut there, so no task reads more than ``records_per_task``, and the task count and
    sizes depend on the records only, not on how many partitions hold them. Every offset of the
    input is in exactly one task. Offsets must be resolved (``>= 0``); overlapping ranges of one
    partition raise :class:`AssignmentError`.
    """
    if isinstance(records_per_task, bool) or not isinstance(records_per_task, int) or records_per_task < 1:
        raise AssignmentError(f"records_per_task must be a positive integer, got {records_per_task!r}")
    for r in ranges:
        if r.from_offset < 0 or r.until_offset < 0:
            raise AssignmentError(f"cannot plan {r}: offsets must be resolved to real offsets (>= 0) first")
    ordered = sorted((r for r in ranges if r.size > 0), key=_range_order)
    _check_no_overlap(ordered)
    total = sum(r.size for r in ordered)
    count = math.ceil(total / records_per_task)
    tasks: list[tuple[OffsetRange, ...]] = []
    current: list[OffsetRange] = []
    placed = 0  # records of the sequence placed in tasks so far
    share_end = total // count if count else 0  # where the current task's share ends
    for r in ordered:
        start = r.from_offset
        while start < r.until_offset:
            end = min(r.until_offset, start + share_end - placed)
            current.append(OffsetRange(r.topic_partition, start, end))
            placed += end - start
            start = end
            if placed == share_end:
                tasks.append(tuple(current))
                current = []
                share_end = total * (len(tasks) + 1) // count
    return tasks


# Spark's planning (KafkaOffsetRangeCalculator): splitting, then grouping with an assignor


def _range_order(r: OffsetRange) -> tuple[bytes, int, int, int]:
    return (_java_order(r.topic_partition.topic), r.topic_partition.partition, r.from_offset, r.until_offset)


def _java_math_round(x: float) -> int:
    # java.lang.Math.round: the closest long, ties towards +infinity, computed exactly.
    # Python's round() rounds ties to even, and floor(x + 0.5) in floating point is off for
    # 0.49999999999999994; Fraction is exact.
    return math.floor(Fraction(x) + Fraction(1, 2))


def _part_count(size: int, total_size: int, min_parts: int) -> int:
    # Spark: math.max(math.round(size.toDouble / totalSize * minParts), 1); the float() calls
    # repeat Scala's Long-to-Double conversions so that huge sizes round the same way.
    return max(_java_math_round(float(size) / float(total_size) * min_parts), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    # Spark's getDividedPartition: part i takes remaining // (parts - i), so the remainder lands
    # on the last parts (10 in 3 -> 3, 3, 4). Empty parts are dropped by the caller.
    out = []
    remaining = r.size
    start = r.from_offset
    for part in range(parts):
        this_part = remaining // (parts - part)
        remaining -= this_part
        end = min(start + this_part, r.until_offset)
        out.append(OffsetRange(r.topic_partition, start, end))
        start = end
    return out


def _positive_option(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise AssignmentError(f"{name} must be a positive integer (as in Spark), got {value!r}")


def split_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: the ranges a batch reads, one per task.

    Empty (``size == 0``) and inverted (``size < 0``) ranges are **dropped**, as Spark drops them;
    data loss (an end below a start) must be reported before this point, as Spark's planner does.
    Then:

    * Neither option set, or only ``minPartitions`` and it is ``<=`` the number of ranges: the
      ranges are returned unchanged.
    * ``maxRecordsPerPartition`` set: each range is first cut into
      ``ceil(size / maxRecordsPerPartition)`` contiguous parts (Spark 4.0, SPARK-49259).
    * ``minPartitions`` set and still more than the number of ranges: ranges whose proportional
      share ``round(size / total * minPartitions)`` is 1 stay whole ("unsplit", decided per
      topic-partition, so after a ``maxRecordsPerPartition`` cut one small piece keeps every piece
      of that partition whole, as in Spark); each other range gets
      ``max(round(size / splitTotal * (minPartitions - #unsplit)), 1)`` parts (SPARK-36576).
      ``round`` is Java's ``Math.round`` (halves go up), so the count is *about*
      ``minPartitions``, sometimes more, as Spark documents.

    A range cut into ``k`` parts gives parts of ``remaining // (k - i)`` offsets, so remainders go
    to the last parts (``[0, 10)`` in 3 -> ``[0, 3) [3, 6) [6, 10)``). Output order: the input
    order, each range replaced by its parts in offset order. Offsets must be resolved (``>= 0``):
    split after turning Spark's ``-2``/``-1`` (earliest/latest) sentinels into real offsets.
    """
    _positive_option("minPartitions", min_partitions)
    _positive_option("maxRecordsPerPartition", max_records_per_partition)
    for r in ranges:
        if r.from_offset < 0 or r.until_offset < 0:
            raise AssignmentError(
                f"cannot split {r}: offsets must be resolved to real offsets (>= 0) first; "
                f"-2 (earliest) and -1 (latest) are sentinels, not positions"
            )
    offset_ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is None and (min_partitions is None or len(offset_ranges) >= min_partitions):
        return offset_ranges

    if max_records_per_partition is not None:
        divided = [
            part
            for r in offset_ranges
            # Scala: math.ceil(size.toDouble / maxRecords).toInt
            for part in _divide(r, math.ceil(float(r.size) / float(max_records_per_partition)))
            if part.size > 0
        ]
    else:
        divided = offset_ranges

    if min_partitions is None or min_partitions <= len(divided):
        return divided

    total_size = sum(r.size for r in divided)
    unsplit = [r for r in divided if _part_count(r.size, total_size, min_partitions) == 1]
    unsplit_tps = {r.topic_partition for r in unsplit}
    split_total_size = total_size - sum(r.size for r in unsplit)
    split_min_partitions = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in divided:
        parts = 1 if r.topic_partition in unsplit_tps else _part_count(r.size, split_total_size, split_min_partitions)
        out.extend(part for part in _divide(r, parts) if part.size > 0)
    return out


def task_member_ids(num_tasks: int) -> list[str]:
    """``["task-00000", "task-00001", ...]``: zero-padded so string order is numeric order.

    At least five digits; wider when ``num_tasks`` needs it, always the same width in one list.
    """
    width = max(5, len(str(max(num_tasks - 1, 0))))
    return [f"task-{i:0{width}d}" for i in range(num_tasks)]


def _check_no_overlap(ordered: Iterable[OffsetRange]) -> None:
    previous: OffsetRange | None = None
    for r in ordered:
        if (
            previous is not None
            and previous.topic_partition == r.topic_partition
            and r.from_offset < previous.until_offset
        ):
            raise AssignmentError(
                f"offset ranges {previous} and {r} overlap: the records in both would be read "
                f"twice; plan each offset of a partition into exactly one range"
            )
        previous = r


def plan_tasks(
    ranges: Sequence[OffsetRange],
    *,
    strategy: str = "range",
    num_tasks: int | None = None,
) -> list[tuple[OffsetRange, ...]]:
    """Group offset ranges into Spark tasks; each tuple is what one task reads.

    * ``num_tasks`` is ``None`` or ``>= len(ranges)``: one task per range, in (topic, partition,
      from_offset) order. (More tasks than ranges comes from :func:`split_ranges`, not from here.)
    * ``num_tasks < len(ranges)``: the ranges are assigned by the ``strategy`` assignor (the
      ``assignmentStrategy`` option: ``range`` | ``roundrobin``) to members ``task-00000``,
      ``task-00001``, ... (see :func:`task_member_ids`), all subscribed to every topic. Each range
      is one unit; a topic's units are numbered in (partition, from_offset) order and stand for
      that topic's partitions, so sub-ranges of a split partition are units of their own (see the
      module docstring). Tasks come in member-id order, each with its ranges in (topic, partition,
      from_offset) order; tasks that get no range are omitted (Range gives a topic with fewer units
      than tasks to the first tasks only), so there may be fewer than ``num_tasks`` tasks.

    Every input range appears in exactly one task; nothing is dropped or split here (empty ranges
    too: drop them with :func:`split_ranges` first). Deterministic: the result depends on the set
    of ranges, not on their order. Overlapping ranges of one partition raise
    :class:`AssignmentError`, as would an unknown strategy or ``num_tasks < 1``.
    """
    assignor = _assignor(strategy)
    if num_tasks is not None and (isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1):
        raise AssignmentError(f"num_tasks must be a positive integer or None, got {num_tasks!r}")
    ordered = sorted(ranges, key=_range_order)
    _check_no_overlap(ordered)
    if num_tasks is None or num_tasks >= len(ordered):
        return [(r,) for r in ordered]

    units: dict[str, list[OffsetRange]] = {}
    for r in ordered:
        units.setdefault(r.topic_partition.topic, []).append(r)
    members = task_member_ids(num_tasks)
    topics = list(units)
    assignment = assignor(
        {member: topics for member in members},
        {topic: len(topic_units) for topic, topic_units in units.items()},
    )
    tasks = []
    for member in members:
        task = sorted((units[tp.topic][tp.partition] for tp in assignment[member]), key=_range_order)
        if task:
            tasks.append(tuple(task))
    return tasks


# Input partitions: what a Spark task is given


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """What one Spark task reads: offset ranges and how to read them. Picklable, self-contained
    (executors resolve nothing: the bootstrap servers are inside ``config``)."""

    ranges: tuple[OffsetRange, ...]
    config: ConfigKey
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    avro: tuple = ()  # kafka_spark.avro.codec.AvroColumn per decoded column (key first)
    fetcher: str = "librdkafka"  # "arrow": kafka_spark.read.arrow; "librdkafka": confluent-kafka
    #: Batch reads: the bounds to resolve again when the task runs (kafka_spark.read.late_binding).
    late: Any = None

    def __repr__(self) -> str:  # the client config is long and may hold credentials
        return f"KafkaInputPartition({', '.join(str(r) for r in self.ranges)})"


def plan_input_partitions(
    ranges: list[OffsetRange],
    *,
    config: ConfigKey,
    min_partitions: int | None,
    max_records_per_partition: int | None,
    max_partitions: int | None,
    assignment_strategy: str,
    fail_on_data_loss: bool,
    include_headers: bool,
    poll_timeout_ms: int,
    avro: tuple = (),
    fetcher: str = "librdkafka",
) -> list[KafkaInputPartition]:
    """Offset ranges -> input partitions (Spark tasks). Pure and deterministic: the same ranges
    and options always give the same partitions, which is what makes a replay read the same
    records.

    Empty ranges are dropped. With none of ``minPartitions``, ``maxRecordsPerPartition`` and
    ``maxPartitions``, tasks are planned by work (:func:`plan_by_work`: large ranges
    split, small ones grouped). With any of them, Spark's planning: ``minPartitions`` /
    ``maxRecordsPerPartition`` split ranges (Spark's KafkaOffsetRangeCalculator), a task per
    range, and ``maxPartitions`` then groups them into at most that many tasks with the
    ``assignmentStrategy`` assignor.
    """
    if min_partitions is None and max_records_per_partition is None and max_partitions is None:
        tasks = plan_by_work(ranges)
    else:
        split = split_ranges(ranges, min_partitions, max_records_per_partition)
        tasks = plan_tasks(split, strategy=assignment_strategy, num_tasks=max_partitions)
    return [
        KafkaInputPartition(
            ranges=task,
            config=config,
            fail_on_data_loss=fail_on_data_loss,
            include_headers=include_headers,
            poll_timeout_ms=poll_timeout_ms,
            avro=avro,
            fetcher=fetcher,
        )
        for task in tasks
    ]


def plan_for_options(ranges: list[OffsetRange], opts: SourceOptions, config: ConfigKey) -> list[KafkaInputPartition]:
    """:func:`plan_input_partitions` with the planning options of a SourceOptions."""
    return plan_input_partitions(
        ranges,
        config=config,
        min_partitions=opts.min_partitions,
        max_records_per_partition=opts.max_records_per_partition,
        max_partitions=opts.max_partitions,
        assignment_strategy=opts.assignment_strategy,
        fail_on_data_loss=opts.fail_on_data_loss,
        include_headers=opts.include_headers,
        avro=opts.avro_columns,
        poll_timeout_ms=opts.poll_timeout_ms,
        fetcher=resolve_fetcher(opts.fetcher, dict(config)),
    )


def resolve_fetcher(choice: str, config: dict[str, str]) -> str:
    """``fetcher`` option -> the read path: ``auto`` is the Arrow fetch path for plaintext
    connections and confluent-kafka when the connection is secured (TLS, SASL), which the Arrow
    path's own client does not speak."""
    if choice != "auto":
        return choice
    return "librdkafka" if secured_connection(config) else "arrow"
