"""Planning by work (kafka_spark.planning), the default when no planning option is set:
table tests of the pure function."""

from __future__ import annotations

import math
import random

import pytest

from kafka_spark.assignment import AssignmentError
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import OffsetRange
from kafka_spark.planning import RECORDS_PER_TASK, plan_by_work


def ranges(topic: str, sizes: list[int], start: int = 0) -> list[OffsetRange]:
    return [OffsetRange(TP(topic, p), start, start + size) for p, size in enumerate(sizes)]


def sizes(tasks) -> list[list[int]]:
    return [[r.size for r in task] for task in tasks]


@pytest.mark.parametrize("partitions", [1, 3, 8, 64, 256, 1000])
def test_a_million_records_make_five_equal_tasks_whatever_the_partition_count(partitions):
    per_partition = 1_000_000 // partitions
    total = per_partition * partitions
    tasks = plan_by_work(ranges("t", [per_partition] * partitions))
    totals = [sum(r.size for r in task) for task in tasks]
    assert sum(totals) == total
    assert len(tasks) == 5
    assert max(totals) - min(totals) <= 1
    assert all(total <= RECORDS_PER_TASK for total in totals)


@pytest.mark.parametrize(
    "given,per_task,expected",
    [
        ([10, 10, 10, 10], 100, [[10, 10, 10, 10]]),  # small ranges share one task
        ([100], 100, [[100]]),  # exactly one task's work
        ([60, 60, 60], 100, [[60, 30], [30, 60]]),  # 180 records: two tasks of 90, a range cut between them
        ([50, 50, 50], 100, [[50, 25], [25, 50]]),
        ([250], 100, [[83], [83], [84]]),  # ceil(250/100) equal parts, the remainder last
        ([30, 250, 30], 100, [[30, 47], [78], [77], [48, 30]]),  # shares end at 77, 155, 232, 310
        ([0, 10, 0], 100, [[10]]),  # empty ranges dropped
        ([], 100, []),
    ],
)
def test_ranges_are_laid_end_to_end_and_cut_into_equal_shares(given, per_task, expected):
    assert sizes(plan_by_work(ranges("t", given), per_task)) == expected


def test_tasks_follow_topic_partition_offset_order_and_cover_every_offset_once():
    given = ranges("b", [5, 5]) + ranges("a", [7, 300, 5])
    tasks = plan_by_work(list(reversed(given)), 100)
    assert [str(r) for task in tasks for r in task] == [
        "a-0[0, 7)",
        "a-1[0, 73)",
        "a-1[73, 154)",
        "a-1[154, 234)",
        "a-1[234, 300)",
        "a-2[0, 5)",
        "b-0[0, 5)",
        "b-1[0, 5)",
    ]
    assert sizes(tasks) == [[7, 73], [81], [80], [66, 5, 5, 5]]
    assert plan_by_work(given, 100) == tasks  # the order given does not matter: a replay plans the same


@pytest.mark.parametrize("seed", range(40))
def test_any_ranges_give_ceil_total_over_limit_tasks_of_equal_work_covering_each_offset_once(seed):
    rng = random.Random(seed)
    per_task = rng.choice([1, 7, 100, 1000])
    given = [
        OffsetRange(TP(rng.choice("xyz"), p), start, start + rng.choice([0, 1, rng.randrange(5000)]))
        for p in range(rng.randrange(1, 60))
        for start in [rng.randrange(10**6)]
    ]
    tasks = plan_by_work(given, per_task)
    total = sum(r.size for r in given)
    totals = [sum(r.size for r in task) for task in tasks]
    assert len(tasks) == math.ceil(total / per_task)
    assert all(0 < t <= per_task for t in totals)
    assert not totals or max(totals) - min(totals) <= 1
    read = sorted(
        (r.topic_partition, offset) for task in tasks for r in task for offset in range(r.from_offset, r.until_offset)
    )
    expected = sorted((r.topic_partition, offset) for r in given for offset in range(r.from_offset, r.until_offset))
    assert read == expected


def test_unresolved_or_overlapping_ranges_and_bad_sizes_are_refused():
    with pytest.raises(AssignmentError, match="resolved"):
        plan_by_work([OffsetRange(TP("t", 0), -2, 10)])
    with pytest.raises(AssignmentError, match="overlap"):
        plan_by_work([OffsetRange(TP("t", 0), 0, 10), OffsetRange(TP("t", 0), 5, 20)])
    with pytest.raises(AssignmentError, match="positive"):
        plan_by_work(ranges("t", [1]), 0)
