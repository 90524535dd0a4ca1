"""Planning offset ranges into Spark tasks (input partitions), on the driver."""

from __future__ import annotations

import pytest

from kafka_spark.client.offset_reader import OffsetReader
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.read.batch import PylogBatchReader
from tests.support.source_fixtures import kafka_cluster, mock_kafka  # noqa: F401


@pytest.fixture(scope="module")
def two_topics(kafka_cluster):
    """Topics A and B (4 partitions each) with 10 records in every partition."""
    a, b = kafka_cluster.new_topic("plan-a"), kafka_cluster.new_topic("plan-b")
    for topic in (a, b):
        for p in range(4):
            kafka_cluster.produce_values(topic, p, 10)
    return a, b


def _plan(cluster, **options):
    opts = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, **options})
    reader = OffsetReader(opts, cluster.bootstrap_servers)
    try:
        return [[str(r) for r in p.ranges] for p in PylogBatchReader(opts, cluster.bootstrap_servers).plan(reader)]
    finally:
        reader.close()


def test_planned_partitions_follow_the_assignment_strategy(kafka_cluster, two_topics):
    a, b = two_topics
    subscribe = f"{a},{b}"
    assert _plan(kafka_cluster, subscribe=subscribe, maxPartitions="3", assignmentStrategy="range") == [
        [f"{a}-0[0, 10)", f"{a}-1[0, 10)", f"{b}-0[0, 10)", f"{b}-1[0, 10)"],
        [f"{a}-2[0, 10)", f"{b}-2[0, 10)"],
        [f"{a}-3[0, 10)", f"{b}-3[0, 10)"],
    ]
    assert _plan(kafka_cluster, subscribe=subscribe, maxPartitions="3", assignmentStrategy="roundrobin") == [
        [f"{a}-0[0, 10)", f"{a}-3[0, 10)", f"{b}-2[0, 10)"],
        [f"{a}-1[0, 10)", f"{b}-0[0, 10)", f"{b}-3[0, 10)"],
        [f"{a}-2[0, 10)", f"{b}-1[0, 10)"],
    ]


def test_default_plan_groups_small_ranges_and_spark_options_plan_as_spark(kafka_cluster, two_topics):
    a, _ = two_topics
    # By work (kafka_spark.planning): four 10-record ranges are one task's work.
    assert _plan(kafka_cluster, subscribe=a) == [[f"{a}-{p}[0, 10)" for p in range(4)]]
    # Any of Spark's planning options gives Spark's plan: a task per partition range.
    assert _plan(kafka_cluster, subscribe=a, minPartitions="1") == [[f"{a}-{p}[0, 10)"] for p in range(4)]
    assert _plan(kafka_cluster, assign=f'{{"{a}":[0]}}', minPartitions="3") == [
        [f"{a}-0[0, 3)"],
        [f"{a}-0[3, 6)"],
        [f"{a}-0[6, 10)"],
    ]
    # ceil(10 / 4) = 3 parts of about equal size, none above 4 (Spark's getDividedPartition).
    assert _plan(kafka_cluster, assign=f'{{"{a}":[1]}}', maxRecordsPerPartition="4") == [
        [f"{a}-1[0, 3)"],
        [f"{a}-1[3, 6)"],
        [f"{a}-1[6, 10)"],
    ]


def test_planning_is_deterministic(kafka_cluster, two_topics):
    a, b = two_topics
    options = dict(subscribe=f"{b},{a}", maxPartitions="5", minPartitions="2", assignmentStrategy="roundrobin")
    assert _plan(kafka_cluster, **options) == _plan(kafka_cluster, **options)


def test_stream_partitions_use_the_same_planner(kafka_cluster, two_topics):
    from kafka_spark.offsets import offsets_to_dict
    from kafka_spark.read.stream import PylogStreamReader

    a, _ = two_topics
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": kafka_cluster.bootstrap_servers,
            "subscribe": a,
            "maxPartitions": "2",
            "assignmentStrategy": "roundrobin",
        }
    )
    reader = PylogStreamReader(opts, kafka_cluster.bootstrap_servers)
    start = offsets_to_dict({TP(a, p): 2 for p in range(4)})
    end = offsets_to_dict({TP(a, p): 7 for p in range(4)})
    planned = reader.partitions(start, end)
    assert [p.ranges for p in planned] == [
        (OffsetRange(TP(a, 0), 2, 7), OffsetRange(TP(a, 2), 2, 7)),
        (OffsetRange(TP(a, 1), 2, 7), OffsetRange(TP(a, 3), 2, 7)),
    ]
    assert reader.partitions(end, end) == []
    reader.stop()
