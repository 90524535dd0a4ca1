"""Range and round-robin assignment, and planning a batch's offset ranges into Spark tasks.

Pure functions: no Spark, no I/O, no clocks, no randomness. The same input always gives the same
output, which is what lets a replayed micro-batch read exactly the records it read the first time.

Three layers, each usable on its own:

1. **Kafka's assignors**, with the results Apache Kafka's Java clients give
   (``org.apache.kafka.clients.consumer.RangeAssignor`` / ``RoundRobinAssignor``, without rack
   information): :func:`range_assign`, :func:`round_robin_assign`, and :func:`assign`, which picks
   one by the ``assignmentStrategy`` option value (``range`` | ``roundrobin``).
2. **Splitting** (:func:`split_ranges`): Spark's ``KafkaOffsetRangeCalculator.getRanges`` for the
   ``minPartitions`` and ``maxRecordsPerPartition`` options, when a batch wants *more* tasks than it
   has ranges or a range is too large for one task.
3. **Grouping** (:func:`plan_tasks`): when *fewer* tasks than ranges are wanted, the ranges are
   dealt to tasks with one of the assignors above.

Documented task layout
----------------------
Topics ``orders`` (5 partitions), ``clicks`` (3) and ``audit`` (1), one offset range per
partition, grouped into 3 tasks (``plan_tasks(ranges, strategy=..., num_tasks=3)``)::

    task        strategy="range"                       strategy="roundrobin"
    ----------  -------------------------------------  ------------------------------
    task-00000  audit-0, clicks-0, orders-0, orders-1  audit-0, clicks-2, orders-2
    task-00001  clicks-1, orders-2, orders-3           clicks-0, orders-0, orders-3
    task-00002  clicks-2, orders-4                     clicks-1, orders-1, orders-4

Range works per topic, so the first task takes the extra partition of every topic that does not
divide evenly (4 ranges against 2 here); round-robin deals the partitions of all topics in one
sorted sequence and stays within one range of even. ``tests/test_assignment.py`` asserts this
table literally.

How a split partition is grouped
--------------------------------
When :func:`split_ranges` has cut one topic-partition into several sub-ranges, each sub-range is
its own unit. The units of a topic are numbered in (partition, from_offset) order and handed to the
assignor as that topic's "partitions" 0, 1, 2, ...: ``orders-0 [0, 50)``, ``orders-0 [50, 100)``,
``orders-1 [0, 100)`` become ``orders`` units 0, 1, 2. Range therefore keeps neighbouring
sub-ranges of a partition together; round-robin spreads them over tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from kafka_spark.errors import PylogError
from kafka_spark.common.topic_partition import TopicPartition

__all__ = [
    "ASSIGNMENT_STRATEGIES",
    "AssignmentError",
    "OffsetRange",
    "assign",
    "plan_tasks",
    "range_assign",
    "round_robin_assign",
    "split_ranges",
    "task_member_ids",
]

#: Legal values of the ``assignmentStrategy`` option, as spelled by Kafka's assignors' ``name()``.
ASSIGNMENT_STRATEGIES: tuple[str, ...] = ("range", "roundrobin")


class AssignmentError(PylogError, ValueError):
    """Invalid input to assignment or task planning; the message names what to change.

    A ``ValueError`` so that option validation can treat it like any other bad option value.
    """


# --------------------------------------------------------------------------------------------
# Kafka's assignors
# --------------------------------------------------------------------------------------------


def _java_order(s: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units; Python compares code points. They
    # disagree only when a character outside the BMP meets one in U+E000..U+FFFF. Big-endian
    # UTF-16 bytes compare exactly as Java does. (surrogatepass: a lone surrogate is a legal
    # Java char, so it must sort rather than raise.)
    return s.encode("utf-16-be", "surrogatepass")


def _validated(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[str]]:
    for topic, count in partitions_per_topic.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssignmentError(
                f"topic {topic!r} has partition count {count!r}; a partition count is an int >= 0"
            )
    subs: dict[str, frozenset[str]] = {}
    for member, topics in subscriptions.items():
        if isinstance(topics, str):
            # A bare string is a Collection[str] of its characters: almost surely a mistake.
            raise AssignmentError(
                f"member {member!r} is subscribed to the string {topics!r}; pass a collection of "
                f"topic names, e.g. [{topics!r}]"
            )
        # A Kafka consumer's subscription is a set of topics; duplicates carry no meaning.
        subs[member] = frozenset(topics)
    return subs


def _finish(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    # Java appends per topic in HashMap order; the set each member gets is what Kafka defines,
    # so lists are returned sorted to make the result deterministic and comparable.
    return {
        member: sorted(tps, key=lambda tp: (_java_order(tp.topic), tp.partition))
        for member, tps in assignment.items()
    }


def range_assign(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's ``RangeAssignor``: per topic, contiguous blocks of partitions.

    For each topic, the members subscribed to it are sorted by member id (Java string order) and
    its partitions ``0..n-1`` are cut into contiguous blocks of ``n // m`` partitions, the first
    ``n % m`` members taking one extra. Topics missing from ``partitions_per_topic`` are skipped,
    as are topics nobody subscribes to. Every member of ``subscriptions`` is a key of the result,
    possibly with ``[]``; each list is sorted by (topic, partition).

    Matches ``org.apache.kafka.clients.consumer.RangeAssignor`` for dynamic members without rack
    information (static ``group.instance.id`` ordering and KIP-881 rack awareness do not apply:
    this API carries neither).
    """
    subs = _validated(subscriptions, partitions_per_topic)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in subs}
    members_per_topic: dict[str, list[str]] = {}
    for member, topics in subs.items():
        for topic in topics:
            members_per_topic.setdefault(topic, []).append(member)
    for topic, members in members_per_topic.items():
        num_partitions = partitions_per_topic.get(topic)
        if num_partitions is None:
            continue
        members.sort(key=_java_order)
        per_member, with_extra = divmod(num_partitions, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, with_extra)
            length = per_member + (1 if i < with_extra else 0)
            assignment[member].extend(
                TopicPartition(topic, p) for p in range(start, start + length)
            )
    return _finish(assignment)


def round_robin_assign(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Kafka's ``RoundRobinAssignor``: all partitions dealt to members in turn.

    All partitions of all subscribed topics (those present in ``partitions_per_topic``), sorted by
    (topic, partition), are dealt one at a time to the members sorted by member id, in a circle
    that carries on from where the last partition was placed; a member not subscribed to the
    partition's topic is skipped. With identical subscriptions the counts differ by at most one;
    with different subscriptions the result can be uneven, exactly as in Kafka. Every member is a
    key of the result, possibly with ``[]``; each list is sorted by (topic, partition).

    Matches ``org.apache.kafka.clients.consumer.RoundRobinAssignor`` for dynamic members.
    """
    subs = _validated(subscriptions, partitions_per_topic)
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in subs}
    members = sorted(subs, key=_java_order)
    topics = sorted({t for topics in subs.values() for t in topics}, key=_java_order)
    cursor = 0
    for topic in topics:
        for partition in range(partitions_per_topic.get(topic, 0)):
            # Terminates: the topic came from some member's subscription.
            while topic not in subs[members[cursor]]:
                cursor = (cursor + 1) % len(members)
            assignment[members[cursor]].append(TopicPartition(topic, partition))
            cursor = (cursor + 1) % len(members)
    return _finish(assignment)


Assignor = Callable[
    [Mapping[str, Collection[str]], Mapping[str, int]], dict[str, list[TopicPartition]]
]

_ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": round_robin_assign}


def _assignor(strategy: str) -> Assignor:
    key = strategy.lower() if isinstance(strategy, str) else strategy
    if key not in _ASSIGNORS:
        raise AssignmentError(
            f"assignmentStrategy {strategy!r} is not supported; use one of "
            f"{', '.join(repr(s) for s in ASSIGNMENT_STRATEGIES)} (case-insensitive). 'range' "
            f"keeps each topic's partitions contiguous per task; 'roundrobin' spreads all "
            f"partitions evenly across tasks."
        )
    return _ASSIGNORS[key]


def assign(
    strategy: str,
    subscriptions: Mapping[str, Collection[str]],
    partitions_per_topic: Mapping[str, int],
) -> dict[str, list[TopicPartition]]:
    """Run the assignor named by ``strategy`` (``"range"`` | ``"roundrobin"``, case-insensitive).

    Raises :class:`AssignmentError` naming the ``assignmentStrategy`` option for any other value.
    """
    return _assignor(strategy)(subscriptions, partitions_per_topic)


# --------------------------------------------------------------------------------------------
# Offset ranges and splitting (Spark's KafkaOffsetRangeCalculator)
# --------------------------------------------------------------------------------------------


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


def _range_order(r: OffsetRange) -> tuple[bytes, int, int, int]:
    return (_java_order(r.topic_partition.topic), r.topic_partition.partition, r.from_offset,
            r.until_offset)


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
    if max_records_per_partition is None and (
        min_partitions is None or len(offset_ranges) >= min_partitions
    ):
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
    out = []
    for r in divided:
        parts = (
            1
            if r.topic_partition in unsplit_tps
            else _part_count(r.size, split_total_size, split_min_partitions)
        )
        out.extend(part for part in _divide(r, parts) if part.size > 0)
    return out


# --------------------------------------------------------------------------------------------
# Grouping ranges into tasks
# --------------------------------------------------------------------------------------------


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
    if num_tasks is not None and (
        isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1
    ):
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
        task = sorted(
            (units[tp.topic][tp.partition] for tp in assignment[member]), key=_range_order
        )
        if task:
            tasks.append(tuple(task))
    return tasks
