"""Planning by work (kafka_spark.planning), the default when no planning option is set:
table tests of the pure function."""

from __future__ import annotations

import pytest

from kafka_spark.assignment import AssignmentError
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import OffsetRange
from kafka_spark.planning import RECORDS_PER_TASK, plan_by_work


def ranges(topic: str, sizes: list[int], start: int = 0) -> list[OffsetRange]:
    return [OffsetRange(TP(topic, p), start, start + size) for p, size in enumerate(sizes)]


def sizes(tasks) -> list[list[int]]:
    return [[r.size for r in task] for task in tasks]


@pytest.mark.parametrize("partitions", [1, 8, 64, 256, 1000])
def test_a_million_records_make_five_tasks_whatever_the_partition_count(partitions):
    per_partition = 1_000_000 // partitions
    tasks = plan_by_work(ranges("t", [per_partition] * partitions))
    totals = [sum(r.size for r in task) for task in tasks]
    assert sum(totals) == per_partition * partitions
    assert all(total <= RECORDS_PER_TASK for total in totals)
    assert len(tasks) == {1: 5, 8: 8, 64: 6, 256: 6, 1000: 5}[partitions]


@pytest.mark.parametrize(
    "given,per_task,expected",
    [
        ([10, 10, 10, 10], 100, [[10, 10, 10, 10]]),  # small ranges share one task
        ([60, 60, 60], 100, [[60], [60], [60]]),  # two would exceed the task's work
        ([50, 50, 50], 100, [[50, 50], [50]]),  # filled up to exactly the limit
        ([250], 100, [[83], [83], [84]]),  # ceil(250/100) equal parts, remainder last
        ([30, 250, 30], 100, [[30], [83], [83], [84], [30]]),  # parts of a big range stand alone
        ([0, 10, 0], 100, [[10]]),  # empty ranges dropped
        ([], 100, []),
    ],
)
def test_ranges_are_split_and_grouped_by_records(given, per_task, expected):
    assert sizes(plan_by_work(ranges("t", given), per_task)) == expected


def test_tasks_follow_topic_partition_offset_order_and_cover_every_offset_once():
    given = ranges("b", [5, 5]) + ranges("a", [7, 300, 5])
    tasks = plan_by_work(list(reversed(given)), 100)
    assert [str(r) for task in tasks for r in task] == [
        "a-0[0, 7)",
        "a-1[0, 100)",
        "a-1[100, 200)",
        "a-1[200, 300)",
        "a-2[0, 5)",
        "b-0[0, 5)",
        "b-1[0, 5)",
    ]
    assert sizes(tasks) == [[7], [100], [100], [100], [5, 5, 5]]
    assert plan_by_work(given, 100) == tasks  # the order given does not matter: a replay plans the same


def test_unresolved_or_overlapping_ranges_and_bad_sizes_are_refused():
    with pytest.raises(AssignmentError, match="resolved"):
        plan_by_work([OffsetRange(TP("t", 0), -2, 10)])
    with pytest.raises(AssignmentError, match="overlap"):
        plan_by_work([OffsetRange(TP("t", 0), 0, 10), OffsetRange(TP("t", 0), 5, 20)])
    with pytest.raises(AssignmentError, match="positive"):
        plan_by_work(ranges("t", [1]), 0)
