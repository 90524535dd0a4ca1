"""Kafka's range and round-robin assignors, Spark's range splitting, and task planning.

The assignors are checked three ways: against the examples in the Javadoc of Kafka's own
``RangeAssignor`` and ``RoundRobinAssignor`` (hand-written tables), against two independent Python
ports as differential oracles (hypothesis: random members, subscriptions and partition counts), and
by invariants. The oracles: kafka-python 3.x (range always; round-robin only with identical
subscriptions, because its round-robin raises KeyError as soon as it must skip a member, see
``test_kafka_python_round_robin_breaks_when_it_must_skip_a_member``) and aiokafka, whose vendored
assignors follow the Java code for different subscriptions too. ``split_ranges`` is checked
against the tables of Spark's ``KafkaOffsetRangeCalculatorSuite`` plus hand-derived
``maxRecordsPerPartition`` cases.
"""

from __future__ import annotations

import warnings

import pytest
from aiokafka.cluster import ClusterMetadata as AioClusterMetadata
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRangeAssignor
from aiokafka.coordinator.assignors.roundrobin import (
    RoundRobinPartitionAssignor as AioRoundRobinAssignor,
)
from aiokafka.protocol.metadata import MetadataResponse_v1 as AioMetadataResponse
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3 loads its protocol schemas with importlib.resources.read_text/open_text,
    # deprecated since Python 3.11: its business, not a finding of these tests.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.cluster import ClusterMetadata
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.protocol.consumer.group import JoinGroupResponse
    from kafka.protocol.metadata import MetadataResponse

import kafka_spark.assignment as assignment_module
from kafka_spark.assignment import AssignmentError, assign, range_assign, round_robin_assign
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.offsets import OffsetRange
from kafka_spark.planning import plan_tasks, split_ranges, task_member_ids

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def names(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    """Render an assignment as {member: ["t0-0", ...]}, the spelling of Kafka's docs."""
    return {member: [str(tp) for tp in tps] for member, tps in assignment.items()}


def r(topic: str, partition: int, start: int, until: int) -> OffsetRange:
    return OffsetRange(TopicPartition(topic, partition), start, until)


def layout(tasks: list[tuple[OffsetRange, ...]]) -> list[list[str]]:
    """Tasks as lists of "topic-partition" names (each range here covers its whole partition)."""
    return [[str(x.topic_partition) for x in task] for task in tasks]


def spans(tasks: list[tuple[OffsetRange, ...]]) -> list[list[str]]:
    return [[str(x) for x in task] for task in tasks]


def kafka_python_assign(
    assignor, subscriptions: dict[str, frozenset[str]], partitions_per_topic: dict[str, int]
) -> dict[str, list[TopicPartition]]:
    """Run a kafka-python assignor on real ClusterMetadata fed a real MetadataResponse."""
    topic_cls = MetadataResponse.MetadataResponseTopic
    partition_cls = topic_cls.MetadataResponsePartition
    response = MetadataResponse(
        version=1,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="localhost", port=9092, rack=None, version=1)],
        controller_id=0,
        topics=[
            topic_cls(
                version=1,
                error_code=0,
                name=topic,
                is_internal=False,
                partitions=[
                    partition_cls(
                        version=1, error_code=0, partition_index=p, leader_id=0, replica_nodes=[0], isr_nodes=[0]
                    )
                    for p in range(count)
                ],
            )
            for topic, count in partitions_per_topic.items()
        ],
    )
    cluster = ClusterMetadata()
    cluster.update_metadata(response)
    members = [
        JoinGroupResponse.JoinGroupResponseMember(
            member_id=member, group_instance_id=None, metadata=assignor.metadata(sorted(topics))
        )
        for member, topics in subscriptions.items()
    ]
    result = assignor.assign(cluster, members)
    return {
        member: sorted(TopicPartition(tp.topic, tp.partition) for tp in a.partitions()) for member, a in result.items()
    }


def aiokafka_assign(
    assignor, subscriptions: dict[str, frozenset[str]], partitions_per_topic: dict[str, int]
) -> dict[str, list[TopicPartition]]:
    """Run an aiokafka assignor on its real ClusterMetadata fed a real MetadataResponse v1."""
    response = AioMetadataResponse(
        brokers=[(0, "localhost", 9092, None)],
        controller_id=0,
        topics=[
            (0, topic, False, [(0, p, 0, [0], [0]) for p in range(count)])
            for topic, count in partitions_per_topic.items()
        ],
    )
    cluster = AioClusterMetadata()
    cluster.update_metadata(response)
    members = {m: assignor.metadata(sorted(topics)) for m, topics in subscriptions.items()}
    result = assignor.assign(cluster, members)
    return {
        member: sorted(TopicPartition(topic, p) for topic, ps in a.assignment for p in ps)
        for member, a in result.items()
    }


# Kafka's Javadoc examples, verbatim.
JAVADOC_TWO_TOPICS = ({"C0": {"t0", "t1"}, "C1": {"t0", "t1"}}, {"t0": 3, "t1": 3})
JAVADOC_RANGE = {"C0": ["t0-0", "t0-1", "t1-0", "t1-1"], "C1": ["t0-2", "t1-2"]}
JAVADOC_ROUND_ROBIN = {"C0": ["t0-0", "t0-2", "t1-1"], "C1": ["t0-1", "t1-0", "t1-2"]}
JAVADOC_UNEVEN = (
    {"C0": {"t0"}, "C1": {"t0", "t1"}, "C2": {"t0", "t1", "t2"}},
    {"t0": 1, "t1": 2, "t2": 3},
)
JAVADOC_ROUND_ROBIN_UNEVEN = {"C0": ["t0-0"], "C1": ["t1-0"], "C2": ["t1-1", "t2-0", "t2-1", "t2-2"]}


# ---------------------------------------------------------------------------------------------
# the oracle itself: kafka-python must reproduce the Java semantics before we trust it
# ---------------------------------------------------------------------------------------------


def test_kafka_python_oracle_reproduces_java_javadoc_examples():
    subs, ppt = JAVADOC_TWO_TOPICS
    assert names(kafka_python_assign(RangePartitionAssignor, subs, ppt)) == JAVADOC_RANGE
    assert names(kafka_python_assign(RoundRobinPartitionAssignor, subs, ppt)) == JAVADOC_ROUND_ROBIN


def test_kafka_python_round_robin_breaks_when_it_must_skip_a_member():
    # kafka-python 3.0.x: the skip loop rebinds member_id to a (group_instance_id, member_id)
    # tuple and looks it up in a dict keyed by member_id. If this starts passing, kafka-python
    # fixed it and the round-robin oracle below can use different subscriptions again.
    with pytest.raises(KeyError):
        kafka_python_assign(RoundRobinPartitionAssignor, *JAVADOC_UNEVEN)


def test_aiokafka_oracle_reproduces_java_javadoc_examples():
    subs, ppt = JAVADOC_TWO_TOPICS
    assert names(aiokafka_assign(AioRangeAssignor, subs, ppt)) == JAVADOC_RANGE
    assert names(aiokafka_assign(AioRoundRobinAssignor, subs, ppt)) == JAVADOC_ROUND_ROBIN
    assert names(aiokafka_assign(AioRoundRobinAssignor, *JAVADOC_UNEVEN)) == JAVADOC_ROUND_ROBIN_UNEVEN


# ---------------------------------------------------------------------------------------------
# assignors: hand-written tables from Kafka's Java semantics
# ---------------------------------------------------------------------------------------------


def test_range_gives_first_members_the_extra_partition_per_topic_as_in_kafka_javadoc():
    assert names(range_assign(*JAVADOC_TWO_TOPICS)) == JAVADOC_RANGE


def test_round_robin_deals_sorted_partitions_in_turn_as_in_kafka_javadoc():
    assert names(round_robin_assign(*JAVADOC_TWO_TOPICS)) == JAVADOC_ROUND_ROBIN


def test_round_robin_skips_members_not_subscribed_to_the_topic_as_in_kafka_javadoc():
    assert names(round_robin_assign(*JAVADOC_UNEVEN)) == JAVADOC_ROUND_ROBIN_UNEVEN


def test_round_robin_with_different_subscriptions_carries_on_after_the_last_owner():
    # Partitions x-0 x-1 x-2 y-0 y-1 y-2 dealt around a, b, c: x-2 skips c (not subscribed to x)
    # and lands on a; y-2 skips a and lands on b.
    subs = {"c": ["y"], "a": ["x"], "b": ["x", "y"]}
    assert names(round_robin_assign(subs, {"x": 3, "y": 3})) == {
        "c": ["y-1"],
        "a": ["x-0", "x-2"],
        "b": ["x-1", "y-0", "y-2"],
    }


def test_range_with_different_subscriptions_divides_each_topic_among_its_subscribers():
    subs, ppt = JAVADOC_UNEVEN
    assert names(range_assign(subs, ppt)) == {
        "C0": ["t0-0"],
        "C1": ["t1-0"],
        "C2": ["t1-1", "t2-0", "t2-1", "t2-2"],
    }
    # t0's single partition goes to the first of its three subscribers, t1's two are split.
    assert names(range_assign({"b": ["t"], "a": ["t"], "c": ["t"]}, {"t": 7})) == {
        "b": ["t-3", "t-4"],
        "a": ["t-0", "t-1", "t-2"],
        "c": ["t-5", "t-6"],
    }


def test_members_sort_lexicographically_not_numerically():
    # Kafka sorts member ids as strings: "c10" comes before "c9".
    assert names(range_assign({"c9": ["t"], "c10": ["t"]}, {"t": 3})) == {
        "c9": ["t-2"],
        "c10": ["t-0", "t-1"],
    }
    assert names(round_robin_assign({"c9": ["t"], "c10": ["t"]}, {"t": 3})) == {
        "c9": ["t-1"],
        "c10": ["t-0", "t-2"],
    }


def test_member_ids_sort_in_java_utf16_order_not_code_point_order():
    # U+1F600 is the surrogate pair D83D DE00 in Java, which sorts before U+FF21; Python's code
    # point order says the opposite. Kafka's Java clients decide, so the emoji member comes first.
    emoji, fullwidth_a = "\U0001f600", "\uff21"
    subs = {fullwidth_a: ["t"], emoji: ["t"]}
    assert names(range_assign(subs, {"t": 1})) == {fullwidth_a: [], emoji: ["t-0"]}
    assert names(round_robin_assign(subs, {"t": 1})) == {fullwidth_a: [], emoji: ["t-0"]}


def test_topics_without_metadata_are_skipped_and_every_member_is_in_the_result():
    subs = {"a": ["known", "unknown"], "b": ["unknown"], "c": []}
    for assignor in (range_assign, round_robin_assign):
        assert names(assignor(subs, {"known": 2, "unsubscribed": 4})) == {
            "a": ["known-0", "known-1"],
            "b": [],
            "c": [],
        }


def test_topic_with_zero_partitions_assigns_nothing():
    for assignor in (range_assign, round_robin_assign):
        assert names(assignor({"a": ["t"], "b": ["t"]}, {"t": 0})) == {"a": [], "b": []}


def test_no_members_gives_empty_assignment():
    assert range_assign({}, {"t": 3}) == {}
    assert round_robin_assign({}, {"t": 3}) == {}


def test_assign_dispatches_on_strategy_case_insensitively():
    subs, ppt = JAVADOC_TWO_TOPICS
    assert names(assign("range", subs, ppt)) == JAVADOC_RANGE
    assert names(assign("RoundRobin", subs, ppt)) == JAVADOC_ROUND_ROBIN
    assert names(assign("ROUNDROBIN", subs, ppt)) == JAVADOC_ROUND_ROBIN


def test_unknown_strategy_error_names_the_option_and_its_legal_values():
    with pytest.raises(AssignmentError) as excinfo:
        assign("sticky", {"a": ["t"]}, {"t": 1})
    message = str(excinfo.value)
    assert "assignmentStrategy" in message
    assert "'sticky'" in message
    assert "'range'" in message and "'roundrobin'" in message
    assert isinstance(excinfo.value, ValueError)


def test_negative_partition_count_is_rejected_naming_the_topic():
    with pytest.raises(AssignmentError, match="'orders'.*-1"):
        range_assign({"a": ["orders"]}, {"orders": -1})


def test_subscription_given_as_bare_string_is_rejected():
    with pytest.raises(AssignmentError, match=r"\['orders'\]"):
        round_robin_assign({"a": "orders"}, {"orders": 1})


# ---------------------------------------------------------------------------------------------
# assignors: differential against kafka-python, and invariants
# ---------------------------------------------------------------------------------------------

# ASCII ids: here Java's UTF-16 order and Python's code point order (kafka-python's) agree;
# the one place they differ has its own test above.
MEMBER_IDS = st.text(alphabet="abcAB-_019", min_size=1, max_size=6)
TOPICS = st.sampled_from(["t0", "t1", "t2", "orders", "clicks", "Audit", "a.b", "x_y-z"])


@st.composite
def groups(draw):
    members = draw(st.lists(MEMBER_IDS, unique=True, max_size=8))
    subscriptions = {m: draw(st.frozensets(TOPICS, max_size=5)) for m in members}
    # Some subscribed topics lack metadata, some topics with metadata have no subscriber.
    partitions_per_topic = draw(st.dictionaries(TOPICS, st.integers(0, 12), max_size=8))
    return subscriptions, partitions_per_topic


@settings(max_examples=300, deadline=None)
@given(groups())
def test_range_matches_kafka_python_for_random_groups(group):
    subscriptions, partitions_per_topic = group
    assert range_assign(subscriptions, partitions_per_topic) == kafka_python_assign(
        RangePartitionAssignor, subscriptions, partitions_per_topic
    )


@settings(max_examples=300, deadline=None)
@given(groups())
def test_range_matches_aiokafka_for_random_groups(group):
    subscriptions, partitions_per_topic = group
    assert range_assign(subscriptions, partitions_per_topic) == aiokafka_assign(
        AioRangeAssignor, subscriptions, partitions_per_topic
    )


@settings(max_examples=300, deadline=None)
@given(groups())
def test_round_robin_matches_aiokafka_for_random_groups(group):
    subscriptions, partitions_per_topic = group
    assert round_robin_assign(subscriptions, partitions_per_topic) == aiokafka_assign(
        AioRoundRobinAssignor, subscriptions, partitions_per_topic
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(MEMBER_IDS, unique=True, max_size=8),
    st.frozensets(TOPICS, max_size=5),
    st.dictionaries(TOPICS, st.integers(0, 12), max_size=8),
)
def test_round_robin_matches_kafka_python_for_identical_subscriptions(members, topics, ppt):
    subscriptions = {m: topics for m in members}
    assert round_robin_assign(subscriptions, ppt) == kafka_python_assign(
        RoundRobinPartitionAssignor, subscriptions, ppt
    )


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from([range_assign, round_robin_assign]))
def test_every_partition_goes_to_exactly_one_subscriber(group, assignor):
    subscriptions, partitions_per_topic = group
    result = assignor(subscriptions, partitions_per_topic)
    assert set(result) == set(subscriptions)
    owners: dict[TopicPartition, str] = {}
    for member, tps in result.items():
        assert tps == sorted(tps)
        for tp in tps:
            assert tp.topic in subscriptions[member]
            assert tp not in owners
            owners[tp] = member
    subscribed = {t for topics in subscriptions.values() for t in topics}
    expected = {TopicPartition(t, p) for t, n in partitions_per_topic.items() if t in subscribed for p in range(n)}
    assert set(owners) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(MEMBER_IDS, unique=True, min_size=1, max_size=8),
    st.dictionaries(TOPICS, st.integers(0, 12), min_size=1, max_size=5),
)
def test_round_robin_with_identical_subscriptions_is_within_one_of_even(members, ppt):
    result = round_robin_assign({m: list(ppt) for m in members}, ppt)
    counts = [len(tps) for tps in result.values()]
    assert max(counts) - min(counts) <= 1


# ---------------------------------------------------------------------------------------------
# split_ranges: Spark's KafkaOffsetRangeCalculatorSuite (tp1..tp3 = t1-1, t2-1, t3-1)
# ---------------------------------------------------------------------------------------------

TP1, TP2, TP3 = TopicPartition("t1", 1), TopicPartition("t2", 1), TopicPartition("t3", 1)


def rr(tp: TopicPartition, start: int, until: int) -> OffsetRange:
    return OffsetRange(tp, start, until)


SPARK_SUITE_CASES = [
    # (Spark test name, minPartitions, input, expected)
    ("with no minPartition: N TopicPartitions to N offset ranges", None, [rr(TP1, 1, 2)], [rr(TP1, 1, 2)]),
    ("with no minPartition: empty ranges ignored", None, [rr(TP1, 1, 2), rr(TP2, 1, 1)], [rr(TP1, 1, 2)]),
    (
        "N TopicPartitions to N offset ranges",
        3,
        [rr(TP1, 1, 2), rr(TP2, 1, 2), rr(TP3, 1, 2)],
        [rr(TP1, 1, 2), rr(TP2, 1, 2), rr(TP3, 1, 2)],
    ),
    (
        "1 TopicPartition to N offset ranges",
        4,
        [rr(TP1, 1, 5)],
        [rr(TP1, 1, 2), rr(TP1, 2, 3), rr(TP1, 3, 4), rr(TP1, 4, 5)],
    ),
    (
        "N skewed TopicPartitions to M offset ranges",
        4,
        [rr(TP1, 1, 5), rr(TP2, 1, 21)],
        [rr(TP1, 1, 5), rr(TP2, 1, 7), rr(TP2, 7, 14), rr(TP2, 14, 21)],
    ),
    (
        "SPARK-30656: ignore empty ranges and split the rest",
        4,
        [rr(TP1, 1, 1), rr(TP2, 1, 21)],
        [rr(TP2, 1, 6), rr(TP2, 6, 11), rr(TP2, 11, 16), rr(TP2, 16, 21)],
    ),
    (
        "SPARK-30656: N very skewed TopicPartitions to M offset ranges",
        4,
        [rr(TP1, 1, 2), rr(TP2, 1, 1001)],
        [rr(TP1, 1, 2), rr(TP2, 1, 334), rr(TP2, 334, 667), rr(TP2, 667, 1001)],
    ),
    (
        "SPARK-30656: minPartitions less than the length of topic partitions",
        1,
        [rr(TP1, 1, 5), rr(TP2, 1, 21)],
        [rr(TP1, 1, 5), rr(TP2, 1, 21)],
    ),
    ("range inexact multiple of minPartitions", 3, [rr(TP1, 1, 11)], [rr(TP1, 1, 4), rr(TP1, 4, 7), rr(TP1, 7, 11)]),
    (
        "empty ranges ignored",
        4,
        [rr(TP1, 1, 5), rr(TP2, 1, 21), rr(TP3, 1, 1)],
        [rr(TP1, 1, 5), rr(TP2, 1, 7), rr(TP2, 7, 14), rr(TP2, 14, 21)],
    ),
    (
        "SPARK-28489: never drop offsets",
        6,
        [rr(TP1, 0, 10), rr(TP2, 0, 10), rr(TP3, 0, 1)],
        [rr(TP1, 0, 3), rr(TP1, 3, 6), rr(TP1, 6, 10), rr(TP2, 0, 3), rr(TP2, 3, 6), rr(TP2, 6, 10), rr(TP3, 0, 1)],
    ),
    (
        "SPARK-36576: 0 small unsplit ranges and 3 large split ranges",
        9,
        [rr(TP1, 0, 10000), rr(TP2, 0, 15000), rr(TP3, 0, 20000)],
        [
            rr(TP1, 0, 5000),
            rr(TP1, 5000, 10000),
            rr(TP2, 0, 5000),
            rr(TP2, 5000, 10000),
            rr(TP2, 10000, 15000),
            rr(TP3, 0, 5000),
            rr(TP3, 5000, 10000),
            rr(TP3, 10000, 15000),
            rr(TP3, 15000, 20000),
        ],
    ),
    (
        "SPARK-36576: 1 small unsplit range and 2 large split ranges",
        6,
        [rr(TP1, 0, 500), rr(TP2, 0, 12000), rr(TP3, 0, 15001)],
        [
            rr(TP1, 0, 500),
            rr(TP2, 0, 6000),
            rr(TP2, 6000, 12000),
            rr(TP3, 0, 5000),
            rr(TP3, 5000, 10000),
            rr(TP3, 10000, 15001),
        ],
    ),
    (
        "SPARK-36576: 2 small unsplit ranges and 1 large split range",
        6,
        [rr(TP1, 0, 1), rr(TP2, 0, 1), rr(TP3, 0, 10000)],
        [
            rr(TP1, 0, 1),
            rr(TP2, 0, 1),
            rr(TP3, 0, 2500),
            rr(TP3, 2500, 5000),
            rr(TP3, 5000, 7500),
            rr(TP3, 7500, 10000),
        ],
    ),
    (
        "SPARK-46798: locations not set when ranges split",
        4,
        [rr(TP1, 0, 1), rr(TP2, 0, 1), rr(TP3, 0, 2)],
        [rr(TP1, 0, 1), rr(TP2, 0, 1), rr(TP3, 0, 1), rr(TP3, 1, 2)],
    ),
]


@pytest.mark.parametrize(
    "min_partitions, ranges, expected",
    [case[1:] for case in SPARK_SUITE_CASES],
    ids=[case[0] for case in SPARK_SUITE_CASES],
)
def test_split_ranges_matches_spark_offset_range_calculator_suite(min_partitions, ranges, expected):
    assert split_ranges(ranges, min_partitions, None) == expected


def test_half_way_shares_round_up_like_java_math_round():
    # Each range's share is 5/10 * 5 = 2.5 parts: Java rounds to 3 (Python's round() would say 2),
    # so minPartitions=5 yields 6 ranges, as Spark does.
    assert split_ranges([r("a", 0, 0, 5), r("b", 0, 0, 5)], 5, None) == [
        r("a", 0, 0, 1),
        r("a", 0, 1, 3),
        r("a", 0, 3, 5),
        r("b", 0, 0, 1),
        r("b", 0, 1, 3),
        r("b", 0, 3, 5),
    ]


def test_max_records_per_partition_cuts_ranges_into_ceil_parts_remainder_last():
    assert split_ranges([r("t", 0, 0, 10), r("t", 1, 100, 104), r("t", 2, 7, 8)], None, 4) == [
        r("t", 0, 0, 3),
        r("t", 0, 3, 6),
        r("t", 0, 6, 10),  # ceil(10 / 4) = 3 parts
        r("t", 1, 100, 104),  # exactly 4: not cut
        r("t", 2, 7, 8),
    ]


def test_max_records_per_partition_then_min_partitions_splits_again_proportionally():
    # maxRecordsPerPartition=4: t-0 [0,10) -> [0,3) [3,6) [6,10); t-1 [0,2) stays: 4 ranges.
    # minPartitions=6 > 4: shares of 12 records x 6: 1.5->2, 1.5->2, 2->2, 1->1, so t-1 is unsplit
    # and the 10 records of t-0 get 5 parts: round(3/10*5)=2, 2, round(4/10*5)=2.
    assert split_ranges([r("t", 0, 0, 10), r("t", 1, 0, 2)], 6, 4) == [
        r("t", 0, 0, 1),
        r("t", 0, 1, 3),
        r("t", 0, 3, 4),
        r("t", 0, 4, 6),
        r("t", 0, 6, 8),
        r("t", 0, 8, 10),
        r("t", 1, 0, 2),
    ]


def test_unsplit_decision_is_per_topic_partition_after_max_records_division():
    # maxRecordsPerPartition=3 cuts a-0 [0,5) into [0,2) and [2,5); b-0 [0,3) stays. minPartitions
    # =4 over 8 records: a-0's [0,2) has share 1 (unsplit), [2,5) and b-0 have 1.5 -> 2. Spark
    # keys "unsplit" by topic-partition, so a-0's [2,5) stays whole too; only b-0 is split.
    assert split_ranges([r("a", 0, 0, 5), r("b", 0, 0, 3)], 4, 3) == [
        r("a", 0, 0, 2),
        r("a", 0, 2, 5),
        r("b", 0, 0, 1),
        r("b", 0, 1, 3),
    ]


def test_max_records_per_partition_alone_drops_empty_ranges():
    assert split_ranges([r("t", 0, 5, 5), r("t", 1, 0, 3)], None, 100) == [r("t", 1, 0, 3)]


def test_inverted_ranges_are_dropped_like_spark():
    assert split_ranges([r("t", 0, 9, 5), r("t", 1, 0, 3)], None, None) == [r("t", 1, 0, 3)]
    assert split_ranges([r("t", 0, 9, 5), r("t", 1, 0, 3)], 3, None) == [
        r("t", 1, 0, 1),
        r("t", 1, 1, 2),
        r("t", 1, 2, 3),
    ]


def test_split_keeps_input_order_with_parts_in_offset_order():
    assert split_ranges([r("z", 0, 0, 4), r("a", 0, 0, 1)], 3, None) == [
        r("z", 0, 0, 2),
        r("z", 0, 2, 4),
        r("a", 0, 0, 1),
    ]


def test_no_ranges_split_to_no_ranges():
    assert split_ranges([], 5, 10) == []


@pytest.mark.parametrize(
    "option, kwargs",
    [
        ("minPartitions", {"min_partitions": 0, "max_records_per_partition": None}),
        ("minPartitions", {"min_partitions": -3, "max_records_per_partition": None}),
        ("maxRecordsPerPartition", {"min_partitions": None, "max_records_per_partition": 0}),
    ],
)
def test_non_positive_split_options_are_rejected_naming_the_option(option, kwargs):
    with pytest.raises(AssignmentError, match=option):
        split_ranges([r("t", 0, 0, 10)], **kwargs)


def test_unresolved_sentinel_offsets_are_rejected_before_splitting():
    with pytest.raises(AssignmentError, match=r"t-0\[-2, -1\).*sentinels"):
        split_ranges([r("t", 0, -2, -1)], 4, None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 3), st.integers(0, 1000), st.integers(0, 2000)),
        max_size=8,
        unique_by=lambda t: (t[0], t[1]),
    ),
    st.one_of(st.none(), st.integers(1, 40)),
    st.one_of(st.none(), st.integers(1, 500)),
)
def test_split_covers_every_offset_exactly_once(specs, min_partitions, max_records):
    ranges = [r(t, p, start, start + size) for t, p, start, size in specs]
    out = split_ranges(ranges, min_partitions, max_records)
    assert all(x.size > 0 for x in out)
    if max_records is not None and min_partitions is None:
        assert all(x.size <= max_records for x in out)
    for original in ranges:
        parts = [x for x in out if x.topic_partition == original.topic_partition]
        if original.size <= 0:
            assert parts == []
            continue
        # Contiguous, in order, exactly the original span.
        assert parts[0].from_offset == original.from_offset
        assert parts[-1].until_offset == original.until_offset
        for left, right in zip(parts, parts[1:], strict=False):
            assert left.until_offset == right.from_offset
    assert split_ranges(ranges, min_partitions, max_records) == out


# ---------------------------------------------------------------------------------------------
# plan_tasks
# ---------------------------------------------------------------------------------------------

UNEVEN_TOPICS = {"orders": 5, "clicks": 3, "audit": 1}
UNEVEN_RANGES = [r(topic, p, 0, 10) for topic, count in UNEVEN_TOPICS.items() for p in range(count)]

# The documented layout (also in kafka_spark/assignment.py's module docstring).
UNEVEN_RANGE_LAYOUT = [
    ["audit-0", "clicks-0", "orders-0", "orders-1"],  # task-00000
    ["clicks-1", "orders-2", "orders-3"],  # task-00001
    ["clicks-2", "orders-4"],  # task-00002
]
UNEVEN_ROUND_ROBIN_LAYOUT = [
    ["audit-0", "clicks-2", "orders-2"],  # task-00000
    ["clicks-0", "orders-0", "orders-3"],  # task-00001
    ["clicks-1", "orders-1", "orders-4"],  # task-00002
]


def test_uneven_topics_in_three_tasks_under_range():
    assert layout(plan_tasks(UNEVEN_RANGES, strategy="range", num_tasks=3)) == UNEVEN_RANGE_LAYOUT


def test_uneven_topics_in_three_tasks_under_roundrobin():
    assert layout(plan_tasks(UNEVEN_RANGES, strategy="roundrobin", num_tasks=3)) == UNEVEN_ROUND_ROBIN_LAYOUT


def test_uneven_layout_agrees_with_kafka_python():
    members = {m: frozenset(UNEVEN_TOPICS) for m in task_member_ids(3)}
    for assignor, expected in (
        (RangePartitionAssignor, UNEVEN_RANGE_LAYOUT),
        (RoundRobinPartitionAssignor, UNEVEN_ROUND_ROBIN_LAYOUT),
    ):
        result = kafka_python_assign(assignor, members, UNEVEN_TOPICS)
        assert [[str(tp) for tp in result[m]] for m in task_member_ids(3)] == expected


def test_module_docstring_shows_the_tested_layout():
    doc = assignment_module.__doc__
    for i, (by_range, by_round_robin) in enumerate(zip(UNEVEN_RANGE_LAYOUT, UNEVEN_ROUND_ROBIN_LAYOUT, strict=True)):
        row = f"task-{i:05d}  {', '.join(by_range):<37}  {', '.join(by_round_robin)}"
        assert row in doc, row


def test_one_task_per_range_sorted_when_num_tasks_is_none_or_large_enough():
    shuffled = list(reversed(UNEVEN_RANGES))
    expected = [
        ["audit-0"],
        ["clicks-0"],
        ["clicks-1"],
        ["clicks-2"],
        ["orders-0"],
        ["orders-1"],
        ["orders-2"],
        ["orders-3"],
        ["orders-4"],
    ]
    assert layout(plan_tasks(shuffled)) == expected
    assert layout(plan_tasks(shuffled, strategy="roundrobin", num_tasks=9)) == expected
    assert layout(plan_tasks(shuffled, num_tasks=50)) == expected


def test_one_task_reads_everything_when_num_tasks_is_one():
    for strategy in ("range", "roundrobin"):
        assert layout(plan_tasks(UNEVEN_RANGES, strategy=strategy, num_tasks=1)) == [
            ["audit-0", "clicks-0", "clicks-1", "clicks-2", "orders-0", "orders-1", "orders-2", "orders-3", "orders-4"]
        ]


def test_split_sub_ranges_are_units_in_partition_then_offset_order():
    # orders units: 0 = orders-0 [0,50), 1 = orders-0 [50,100), 2 = orders-1 [0,100).
    ranges = [r("orders", 1, 0, 100), r("orders", 0, 50, 100), r("orders", 0, 0, 50)]
    assert spans(plan_tasks(ranges, strategy="range", num_tasks=2)) == [
        ["orders-0[0, 50)", "orders-0[50, 100)"],
        ["orders-1[0, 100)"],
    ]
    assert spans(plan_tasks(ranges, strategy="roundrobin", num_tasks=2)) == [
        ["orders-0[0, 50)", "orders-1[0, 100)"],
        ["orders-0[50, 100)"],
    ]


def test_split_then_plan_spreads_a_skewed_partition_over_tasks():
    ranges = split_ranges([r("orders", 0, 0, 900), r("orders", 1, 0, 100)], 10, None)
    assert spans(plan_tasks(ranges, strategy="roundrobin", num_tasks=4)) == [
        ["orders-0[0, 100)", "orders-0[400, 500)", "orders-0[800, 900)"],
        ["orders-0[100, 200)", "orders-0[500, 600)", "orders-1[0, 100)"],
        ["orders-0[200, 300)", "orders-0[600, 700)"],
        ["orders-0[300, 400)", "orders-0[700, 800)"],
    ]


def test_range_strategy_puts_single_partition_topics_on_first_task_and_omits_empty_tasks():
    ranges = [r("a", 0, 0, 10), r("b", 0, 0, 10), r("c", 0, 0, 10)]
    assert layout(plan_tasks(ranges, strategy="range", num_tasks=2)) == [["a-0", "b-0", "c-0"]]
    assert layout(plan_tasks(ranges, strategy="roundrobin", num_tasks=2)) == [["a-0", "c-0"], ["b-0"]]


def test_task_member_ids_are_zero_padded_so_string_order_is_numeric_order():
    assert task_member_ids(3) == ["task-00000", "task-00001", "task-00002"]
    wide = task_member_ids(100_001)
    assert wide[0] == "task-000000" and wide[-1] == "task-100000"
    assert sorted(wide) == wide


def test_plan_tasks_rejects_unknown_strategy_naming_the_option():
    with pytest.raises(AssignmentError, match="assignmentStrategy.*'range'.*'roundrobin'"):
        plan_tasks(UNEVEN_RANGES, strategy="sticky")


@pytest.mark.parametrize("num_tasks", [0, -1, 2.5, True])
def test_plan_tasks_rejects_num_tasks_that_is_not_a_positive_int(num_tasks):
    with pytest.raises(AssignmentError, match="num_tasks"):
        plan_tasks(UNEVEN_RANGES, num_tasks=num_tasks)


def test_overlapping_ranges_of_one_partition_are_rejected():
    with pytest.raises(AssignmentError, match=r"orders-0\[0, 50\) and orders-0\[40, 90\) overlap"):
        plan_tasks([r("orders", 0, 40, 90), r("orders", 0, 0, 50)], num_tasks=1)


def test_offset_range_requires_a_topic_partition():
    with pytest.raises(TypeError, match="TopicPartition"):
        OffsetRange(("orders", 0), 0, 10)  # type: ignore[arg-type]
    assert r("orders", 3, 100, 250).size == 150


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["orders", "clicks", "audit"]), st.integers(0, 6), st.integers(1, 50)),
        min_size=1,
        max_size=20,
        unique_by=lambda t: (t[0], t[1]),
    ),
    st.integers(1, 25),
    st.sampled_from(["range", "roundrobin"]),
    st.randoms(use_true_random=False),
)
def test_plan_is_a_deterministic_partition_of_the_ranges(specs, num_tasks, strategy, rnd):
    # Some partitions are cut into several sub-ranges so that units outnumber partitions.
    ranges = [r(topic, p, start, start + 1) for topic, p, pieces in specs for start in range(0, pieces % 4 + 1)]
    tasks = plan_tasks(ranges, strategy=strategy, num_tasks=num_tasks)
    shuffled = list(ranges)
    rnd.shuffle(shuffled)
    assert plan_tasks(shuffled, strategy=strategy, num_tasks=num_tasks) == tasks
    flat = [x for task in tasks for x in task]
    assert sorted(flat, key=str) == sorted(ranges, key=str)
    assert all(task for task in tasks)
    if num_tasks >= len(ranges):
        assert len(tasks) == len(ranges)
    elif strategy == "roundrobin":
        # Every task subscribes to every topic, so dealing reaches every task.
        assert len(tasks) == num_tasks
    else:
        assert 1 <= len(tasks) <= num_tasks
