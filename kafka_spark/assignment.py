"""Kafka's range and round-robin assignors, pure.

Pure functions: no Spark, no I/O, no clocks, no randomness. The same input always gives the same
output, which is what lets a replayed micro-batch read exactly the records it read the first time.

The assignors give the results Apache Kafka's Java clients give
(``org.apache.kafka.clients.consumer.RangeAssignor`` / ``RoundRobinAssignor``, without rack
information): :func:`range_assign`, :func:`round_robin_assign`, and :func:`assign`, which picks
one by the ``assignmentStrategy`` option value (``range`` | ``roundrobin``). Planning
(kafka_spark.planning) uses them to group a batch's offset ranges into fewer tasks
(``maxPartitions``).

Documented task layout
----------------------
Topics ``orders`` (5 partitions), ``clicks`` (3) and ``audit`` (1), one offset range per
partition, grouped into 3 tasks (``kafka_spark.planning.plan_tasks(ranges, strategy=...,
num_tasks=3)``)::

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
When :func:`kafka_spark.planning.split_ranges` has cut one topic-partition into several
sub-ranges, each sub-range is its own unit. The units of a topic are numbered in (partition,
from_offset) order and handed to the assignor as that topic's "partitions" 0, 1, 2, ...:
``orders-0 [0, 50)``, ``orders-0 [50, 100)``, ``orders-1 [0, 100)`` become ``orders`` units 0,
1, 2. Range therefore keeps neighbouring sub-ranges of a partition together; round-robin spreads
them over tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import PylogError

__all__ = [
    "ASSIGNMENT_STRATEGIES",
    "AssignmentError",
    "assign",
    "range_assign",
    "round_robin_assign",
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
            raise AssignmentError(f"topic {topic!r} has partition count {count!r}; a partition count is an int >= 0")
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
        member: sorted(tps, key=lambda tp: (_java_order(tp.topic), tp.partition)) for member, tps in assignment.items()
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
            assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
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


Assignor = Callable[[Mapping[str, Collection[str]], Mapping[str, int]], dict[str, list[TopicPartition]]]

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
