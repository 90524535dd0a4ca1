"""Offset JSON (byte-compatible with Spark's), offset specs and the per-trigger rate limit."""

from __future__ import annotations

import json

import pytest

from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import (
    EPOCHS_KEY,
    OffsetJsonError,
    new_offset_count,
    offsets_from_dict,
    offsets_from_json,
    offsets_to_dict,
    offsets_to_json,
    partitions_from_json,
    positions_from_dict,
    positions_to_dict,
    rate_limit,
)

# ------------------------------------------------------------------------------ JSON golden strings


def test_offset_json_is_spark_compact_form_sorted_by_topic_then_numeric_partition():
    offsets = {TP("orders", 1): -1, TP("orders", 0): 23, TP("b", 10): 5, TP("b", 2): 7}
    assert offsets_to_json(offsets) == '{"b":{"2":7,"10":5},"orders":{"0":23,"1":-1}}'


def test_offset_json_of_spark_documentation_example_round_trips_byte_for_byte():
    text = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    parsed = offsets_from_json(text)
    assert parsed == {TP("topicA", 0): 23, TP("topicA", 1): -1, TP("topicB", 0): -2}
    assert offsets_to_json(parsed) == text


def test_offset_json_written_by_spark_in_any_key_order_parses():
    # Spark's JsonUtils writes through a HashMap; object order is not meaningful.
    assert offsets_from_json('{"b":{"1":4,"0":3},"a":{"0":1}}') == {
        TP("a", 0): 1,
        TP("b", 0): 3,
        TP("b", 1): 4,
    }


def test_offset_dict_iterates_in_sorted_order_so_checkpoint_json_is_deterministic():
    d = offsets_to_dict({TP("z", 0): 1, TP("a", 11): 2, TP("a", 3): 3})
    assert json.dumps(d) == '{"a": {"3": 3, "11": 2}, "z": {"0": 1}}'
    assert offsets_from_dict(d) == {TP("z", 0): 1, TP("a", 11): 2, TP("a", 3): 3}


def test_empty_offsets_are_an_empty_object():
    assert offsets_to_json({}) == "{}"
    assert offsets_from_json("{}") == {}


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[1,2]", '{"t":[0,1]}', '{"t":{"x":1}}', '{"t":{"0":"5"}}', '{"t":{"0":true}}', '{"t":{"0":1.5}}'],
)
def test_malformed_offset_json_quotes_spark_expected_shape(text):
    with pytest.raises(OffsetJsonError) as e:
        offsets_from_json(text)
    assert str(e.value) == f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {text}'


def test_assign_json_parses_sorted_unique_partitions():
    assert partitions_from_json('{"b":[2,0],"a":[1,1]}') == [TP("a", 1), TP("b", 0), TP("b", 2)]


@pytest.mark.parametrize("text", ['{"t":{"0":1}}', '{"t":[-1]}', '{"t":["0"]}', "[]", "x"])
def test_malformed_assign_json_quotes_spark_expected_shape(text):
    with pytest.raises(OffsetJsonError, match=r'Expected e.g. \{"topicA":\[0,1\],"topicB":\[0,1\]\}'):
        partitions_from_json(text)


# ------------------------------------------------------------------------------ rate limit

A0, A1, A2 = TP("a", 0), TP("a", 1), TP("a", 2)
LONG_MAX = 2**63 - 1

RATE_LIMIT_TABLE = [
    # (case, limit, from, until, earliest_of_new, expected)
    ("equal backlogs split evenly", 10, {A0: 0, A1: 0}, {A0: 100, A1: 100}, {}, {A0: 5, A1: 5}),
    ("proportional to backlog", 8, {A0: 0, A1: 0}, {A0: 30, A1: 10}, {}, {A0: 6, A1: 2}),
    ("large share floored", 10, {A0: 0, A1: 0}, {A0: 1000, A1: 1}, {}, {A0: 9, A1: 1}),
    (
        "share below one rounded up so small partitions are not starved",
        1,
        {A0: 0, A1: 0, A2: 0},
        {A0: 10, A1: 10, A2: 10},
        {},
        {A0: 1, A1: 1, A2: 1},
    ),
    ("capped at the latest offset", 100, {A0: 0, A1: 0}, {A0: 5, A1: 5}, {}, {A0: 5, A1: 5}),
    ("offsets start where the last batch ended", 4, {A0: 10, A1: 20}, {A0: 30, A1: 40}, {}, {A0: 12, A1: 22}),
    ("new partition counts from its earliest offset", 4, {A0: 10}, {A0: 20, A1: 20}, {A1: 10}, {A0: 12, A1: 12}),
    ("no backlog keeps the latest offset", 4, {A0: 10, A1: 20}, {A0: 10, A1: 30}, {}, {A0: 10, A1: 24}),
    ("nothing new returns the latest offsets unchanged", 4, {A0: 10}, {A0: 10}, {}, {A0: 10}),
    (
        "offset that went backwards is left to the data-loss check",
        4,
        {A0: 50, A1: 0},
        {A0: 10, A1: 100},
        {},
        {A0: 10, A1: 4},
    ),
    ("new partition without a known start keeps the latest offset", 4, {A0: 0}, {A0: 8, A1: 8}, {}, {A0: 4, A1: 8}),
    ("Long overflow guard", LONG_MAX, {A0: LONG_MAX - 10}, {A0: LONG_MAX - 1}, {}, {A0: LONG_MAX - 1}),
]


@pytest.mark.parametrize(
    "limit,start,until,earliest_of_new,expected",
    [row[1:] for row in RATE_LIMIT_TABLE],
    ids=[row[0] for row in RATE_LIMIT_TABLE],
)
def test_rate_limit_matches_spark(limit, start, until, earliest_of_new, expected):
    assert rate_limit(limit, start, until, earliest_of_new) == expected


def test_rate_limit_never_exceeds_limit_by_more_than_one_per_partition():
    start = {TP("t", p): 0 for p in range(7)}
    until = {TP("t", p): 3 + 17 * p for p in range(7)}
    for limit in range(1, 200):
        end = rate_limit(limit, start, until)
        taken = sum(end[tp] - start[tp] for tp in until)
        assert taken <= limit + len(until)
        assert all(start[tp] <= end[tp] <= until[tp] for tp in until)


def test_new_offset_count_counts_missing_partitions_from_zero():
    assert new_offset_count({A0: 5}, {A0: 8, A1: 4}) == 3 + 4


# -- leader epochs in checkpointed offsets (KIP-320) -------------------------------------------


def test_offsets_with_leader_epochs_round_trip_through_json():
    offsets = {TP("orders", 1): 7, TP("orders", 0): 23, TP("pay.ments-2", 0): 5}
    epochs = {TP("orders", 0): 4, TP("orders", 1): 3, TP("pay.ments-2", 0): 0}
    written = json.dumps(positions_to_dict(offsets, epochs), separators=(",", ":"))
    assert written == (
        '{"orders":{"0":23,"1":7},"pay.ments-2":{"0":5},"@leaderEpochs":{"orders":{"0":4,"1":3},"pay.ments-2":{"0":0}}}'
    )
    assert positions_from_dict(json.loads(written)) == (offsets, epochs)


def test_offsets_without_epochs_spark_written_or_older_pylog_parse_with_no_epochs():
    spark_written = json.loads('{"orders":{"1":7,"0":23}}')
    assert positions_from_dict(spark_written) == ({TP("orders", 0): 23, TP("orders", 1): 7}, {})
    # no epoch known: no key at all, so the JSON stays Spark's
    assert positions_to_dict({TP("orders", 0): 23}, {}) == {"orders": {"0": 23}}
    assert positions_to_dict({TP("orders", 0): 23}, {TP("orders", 0): -1}) == {"orders": {"0": 23}}


def test_epochs_key_cannot_be_a_topic_name_and_the_options_do_not_take_it():
    from kafka_spark.broker.storage.log_manager import is_valid_topic_name

    assert EPOCHS_KEY == "@leaderEpochs" and not is_valid_topic_name(EPOCHS_KEY)
    # startingOffsets / endingOffsets parse as before: the key is no topic there either
    with pytest.raises(OffsetJsonError):
        offsets_from_json('{"orders":{"0":23},"@leaderEpochs":{"orders":{"0":4}}}')


def test_epochs_of_partitions_without_offsets_are_dropped_and_bad_epochs_are_refused():
    data = {"orders": {"0": 23}, EPOCHS_KEY: {"orders": {"0": 4, "1": 9}}}
    assert positions_from_dict(data) == ({TP("orders", 0): 23}, {TP("orders", 0): 4})
    with pytest.raises(OffsetJsonError, match="@leaderEpochs"):
        positions_from_dict({"orders": {"0": 23}, EPOCHS_KEY: {"orders": {"0": "four"}}})


def test_the_file_sink_reads_checkpointed_offsets_with_epochs_as_kafka_offsets():
    from kafka_spark.files.sidecar import kafka_offsets_of

    raw = '{"orders":{"0":23},"@leaderEpochs":{"orders":{"0":4}}}'
    assert kafka_offsets_of(raw) == {"orders": {"0": 23}}
