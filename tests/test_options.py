"""Option parsing and validation: Spark's Kafka source options, defaults and error messages."""

from __future__ import annotations

import logging

import pytest

from kafka_spark.client.config import consumer_config
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import (
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
)
from kafka_spark.options import (
    Assign,
    PylogOptionError,
    Subscribe,
    SubscribePattern,
    check_batch,
    check_streaming,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "h:9092"}


def parse(**options):
    return parse_source_options({**BASE, **options})


def lowered(options):
    # What PySpark hands a data source: a CaseInsensitiveDict, keys lower-cased.
    from pyspark.sql.datasource import CaseInsensitiveDict

    return CaseInsensitiveDict(options)


def test_defaults_are_spark_defaults():
    o = parse(subscribe="orders")
    assert o.subscription == Subscribe(("orders",))
    assert o.starting is None and o.ending is None
    assert isinstance(o.starting_for(streaming=True), LatestOffsets)
    assert isinstance(o.starting_for(streaming=False), EarliestOffsets)
    assert isinstance(o.ending_for_batch(), LatestOffsets)
    assert o.fail_on_data_loss is True
    assert o.include_headers is False
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None
    assert o.max_trigger_delay_ms == 15 * 60 * 1000
    assert o.starting_by_timestamp_strategy == "error"
    assert o.assignment_strategy == "range"
    assert o.max_partitions is None and o.min_partitions is None
    assert o.poll_timeout_ms == 120_000
    assert o.commit_offsets_to_group is False


def test_options_arrive_lower_cased_from_pyspark_and_are_understood():
    o = parse_source_options(
        lowered(
            {
                **BASE,
                "subscribePattern": "orders-.*",
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": "100",
                "failOnDataLoss": "FALSE",
                "includeHeaders": "True",
                "kafka.isolation.level": "read_committed",
            }
        )
    )
    assert o.subscription == SubscribePattern("orders-.*")
    assert isinstance(o.starting, EarliestOffsets)
    assert o.max_offsets_per_trigger == 100
    assert o.fail_on_data_loss is False and o.include_headers is True
    assert o.kafka_config == {"bootstrap.servers": "h:9092", "isolation.level": "read_committed"}


def test_mixed_case_option_names_in_a_plain_dict_are_understood():
    o = parse_source_options({"KAFKA.Bootstrap.Servers": "h:1", "SUBSCRIBE": "a, b ,"})
    assert o.subscription == Subscribe(("a", "b"))
    assert o.kafka_config["bootstrap.servers"] == "h:1"


def test_assign_parses_partitions():
    o = parse(assign='{"b":[1],"a":[0,2]}')
    assert o.subscription == Assign((TP("a", 0), TP("a", 2), TP("b", 1)))


def test_pattern_must_match_whole_topic_name():
    pattern = parse(subscribePattern="orders-[0-9]+").subscription
    assert pattern.matches("orders-12") and not pattern.matches("orders-12-dlq")


@pytest.mark.parametrize(
    "options,message",
    [
        (
            {},
            "One of the following options must be specified for the pylog source: subscribe, subscribePattern, assign",
        ),
        (
            {"subscribe": "a", "assign": '{"a":[0]}'},
            "Only one of the following options can be specified.*got subscribe, assign",
        ),
        ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe'"),
        ({"subscribePattern": " "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "orders-("}, "subscribePattern 'orders-\\(' is not a valid regular"),
        ({"assign": "[0]"}, "assign: Expected e.g."),
        ({"subscribe": "a", "startingOffsets": "{bad"}, 'startingOffsets: Expected e.g. \\{"topicA":\\{"0":23'),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "startingOffsets for a-0 is -3"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be positive, but it was 0"),
        ({"subscribe": "a", "minPartitions": "x"}, "minPartitions must be a positive integer"),
        ({"subscribe": "a", "maxRecordsPerPartition": "-5"}, "maxRecordsPerPartition must be positive"),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "minOffsetsPerTrigger \\(10\\) is higher than maxOffsetsPerTrigger \\(5\\)",
        ),
        (
            {"subscribe": "a", "minPartitions": "8", "maxPartitions": "4"},
            "minPartitions \\(8\\) is higher than maxPartitions \\(4\\)",
        ),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, "failOnDataLoss must be 'true' or 'false'"),
        ({"subscribe": "a", "includeHeaders": "1"}, "includeHeaders must be 'true' or 'false'"),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp must be a timestamp in milliseconds"),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "closest"},
            "startingOffsetsByTimestampStrategy must be 'error' or 'latest'",
        ),
        ({"subscribe": "a", "assignmentStrategy": "sticky"}, "assignmentStrategy must be 'range' or 'roundrobin'"),
        ({"subscribe": "a", "commitOffsetsToGroup": "true"}, "commitOffsetsToGroup=true needs .* set kafka.group.id"),
        ({"subscribe": "a", "fetcher": "fast"}, "fetcher must be 'auto', 'arrow' or 'librdkafka'"),
        (
            {"subscribe": "a", "fetcher": "arrow", "kafka.security.protocol": "SASL_SSL"},
            "fetcher=arrow reads over plaintext connections only.*set fetcher=librdkafka",
        ),
    ],
)
def test_invalid_options_raise_errors_naming_the_option(options, message):
    with pytest.raises(PylogOptionError, match=message):
        parse(**options)


@pytest.mark.parametrize(
    "param,advice",
    [
        ("kafka.auto.offset.reset", "Instead set the source option 'startingOffsets' to 'earliest' or 'latest'"),
        ("kafka.key.deserializer", "keys are always deserialized as byte arrays"),
        ("kafka.value.deserializer", "values are always deserialized as byte arrays"),
        ("kafka.enable.auto.commit", "set commitOffsetsToGroup=true together with kafka.group.id"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
    ],
)
def test_kafka_params_spark_rejects_are_rejected_with_spark_advice(param, advice):
    with pytest.raises(PylogOptionError, match=advice):
        parse(subscribe="a", **{param: "x"})


def test_timestamp_options_take_precedence_as_in_spark():
    o = parse(
        subscribe="a",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"a":{"0":5}}',
        startingTimestamp="1000",
        endingOffsets="latest",
        endingOffsetsByTimestamp='{"a":{"0":7}}',
    )
    assert o.starting == GlobalTimestamp(1000) and o.starting_option == "startingTimestamp"
    assert o.ending == SpecificTimestamps({TP("a", 0): 7})
    assert o.ending_option == "endingOffsetsByTimestamp"
    o = parse(subscribe="a", startingOffsets='{"a":{"0":-2,"1":17}}')
    assert o.starting == SpecificOffsets({TP("a", 0): -2, TP("a", 1): 17})


def test_durations_parse_like_spark_time_strings():
    assert parse(subscribe="a", maxTriggerDelay="30s").max_trigger_delay_ms == 30_000
    assert parse(subscribe="a", maxTriggerDelay="250").max_trigger_delay_ms == 250
    assert parse(subscribe="a", maxTriggerDelay="2h").max_trigger_delay_ms == 7_200_000


def test_pylog_options_parse():
    o = parse(
        subscribe="a",
        assignmentStrategy="RoundRobin",
        maxPartitions="3",
        minPartitions="2",
        commitOffsetsToGroup="true",
        **{"kafka.group.id": "etl"},
        startingOffsetsFromOutput="/data/out",
    )
    assert o.assignment_strategy == "roundrobin"
    assert (o.min_partitions, o.max_partitions) == (2, 3)
    assert o.commit_offsets_to_group and o.group_id == "etl"
    assert o.starting_offsets_from_output == "/data/out"


@pytest.mark.parametrize(
    "typo,meant",
    [
        ("startingOffset", "startingOffsets"),
        ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
        ("FAILONDATALOS", "failOnDataLoss"),
        ("includeHeader", "includeHeaders"),
        ("subscribes", "subscribe"),
    ],
)
def test_unknown_option_close_to_a_known_one_fails_with_did_you_mean(typo, meant):
    with pytest.raises(
        PylogOptionError,
        match=f"unknown option '{typo.lower()}' for the pylog source: did "
        rf"you mean {meant}\?",
    ):
        parse_source_options(lowered({**BASE, "subscribe": "a", typo: "x"}))


def test_unknown_option_far_from_any_is_ignored_with_one_warning_where_defined(caplog, monkeypatch):
    from kafka_spark import option_names

    monkeypatch.setattr(option_names, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="kafka_spark"):
        parse_source_options({**BASE, "subscribe": "a", "queryLabel": "nightly"}, warn=True)
        parse_source_options({**BASE, "subscribe": "a", "queryLabel": "nightly"})  # executors: silent
    warnings = [r.getMessage() for r in caplog.records if "querylabel" in r.getMessage().lower()]
    assert warnings == [
        "the pylog source: ignoring unknown option 'querylabel' (not one of its options; Spark ignores it too)"
    ]


def test_avro_and_schema_registry_options_are_known(caplog):
    with caplog.at_level(logging.WARNING, logger="kafka_spark"):
        parse_source_options(
            {
                **BASE,
                "subscribe": "a",
                "valueFormat": "binary",
                "avroMode": "PERMISSIVE",
                "schemaRegistry.basic.auth.user.info": "u:p",
            },
            warn=True,
        )
    assert "unknown option" not in caplog.text


@pytest.mark.parametrize(
    "options,valid",
    [
        ({"startingOffsets": "earlist"}, ["'earliest' or 'latest'", "offset JSON", "Did you mean 'earliest'"]),
        ({"endingOffsets": "lastest"}, ["'earliest' or 'latest'", "Did you mean 'latest'"]),
        ({"failOnDataLoss": "ture"}, ["'true' or 'false'", "Did you mean 'true'"]),
        ({"assignmentStrategy": "round-robin"}, ["'range' or 'roundrobin'", "Did you mean 'roundrobin'"]),
        ({"fetcher": "arow"}, ["'auto', 'arrow' or 'librdkafka'", "Did you mean 'arrow'"]),
        ({"startingOffsetsByTimestampStrategy": "lates"}, ["'error' or 'latest'"]),
    ],
)
def test_an_invalid_value_lists_the_valid_ones(options, valid):
    with pytest.raises(PylogOptionError) as error:
        parse(subscribe="a", **options)
    for text in valid:
        assert text in str(error.value)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest \\(-1\\)"),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "endingOffsets for a-0 can't be earliest \\(-2\\)"),
    ],
)
def test_batch_rejects_latest_start_and_earliest_end(options, message):
    o = parse(subscribe="a", **options)
    with pytest.raises(PylogOptionError, match=message):
        check_batch(o)


@pytest.mark.parametrize("option", ["endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"])
def test_streaming_rejects_ending_options(option):
    value = {"endingOffsets": "latest", "endingTimestamp": "5", "endingOffsetsByTimestamp": '{"a":{"0":5}}'}[option]
    o = parse(subscribe="a", **{option: value})
    check_batch(o)
    with pytest.raises(PylogOptionError, match=f"ending offset not valid in streaming queries: remove {option}"):
        check_streaming(o)


def test_consumer_config_forces_what_spark_forces_and_keeps_user_settings():
    o = parse(subscribe="a", **{"kafka.isolation.level": "read_committed", "kafka.fetch.wait.max.ms": "50"})
    config = dict(consumer_config(o, "h:9092", "gen-executor"))
    assert config["enable.auto.commit"] == "false"
    assert config["auto.offset.reset"] == "error"
    assert config["group.id"] == "gen-executor"
    assert config["isolation.level"] == "read_committed"
    assert config["fetch.wait.max.ms"] == "50"
    # Java's default, which Spark users get, not librdkafka's read_committed.
    default = dict(consumer_config(parse(subscribe="a"), "h:9092", "g"))
    assert default["isolation.level"] == "read_uncommitted"
    # A forced kafka.group.id wins over the generated one (Spark's setIfUnset).
    forced = dict(consumer_config(parse(subscribe="a", **{"kafka.group.id": "mine"}), "h:9092", "g"))
    assert forced["group.id"] == "mine"


def test_parsed_options_are_frozen_and_picklable():
    import dataclasses
    import pickle

    o = parse(subscribe="a", startingOffsets='{"a":{"0":1}}')
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.include_headers = True
    assert pickle.loads(pickle.dumps(o)) == o


@pytest.mark.parametrize(
    "kafka,expected",
    [
        ({}, "arrow"),
        ({"kafka.security.protocol": "PLAINTEXT"}, "arrow"),
        ({"kafka.security.protocol": "SSL"}, "librdkafka"),
        ({"kafka.sasl.mechanism": "PLAIN"}, "librdkafka"),
        ({"kafka.ssl.ca.location": "/etc/ca.pem"}, "librdkafka"),
    ],
)
def test_fetcher_auto_reads_secured_clusters_through_confluent_kafka(kafka, expected):
    from kafka_spark.offsets import OffsetRange
    from kafka_spark.planning import plan_for_options

    opts = parse(subscribe="a", **kafka)
    config = consumer_config(opts, "h:9092", "g")
    (task,) = plan_for_options([OffsetRange(TP("a", 0), 0, 5)], opts, config)
    assert task.fetcher == expected


def test_topic_level_offsets_json_parses_whole_topics_beside_partitions():
    o = parse(
        subscribe="a,b",
        startingOffsets='{"a":"earliest","b":{"0":23,"1":-2}}',
        endingOffsets='{"a":"LATEST","b":{"0":30,"1":-1}}',
    )
    assert o.starting == SpecificOffsets({TP("b", 0): 23, TP("b", 1): -2}, {"a": -2})
    assert o.ending == SpecificOffsets({TP("b", 0): 30, TP("b", 1): -1}, {"a": -1})
    assert o.starting.expand([TP("a", 0), TP("a", 1), TP("b", 0)]) == {
        TP("a", 0): -2,
        TP("a", 1): -2,
        TP("b", 0): 23,
        TP("b", 1): -2,
    }
    check_batch(o)
    with pytest.raises(PylogOptionError, match="a topic's value is 'earliest', 'latest' or its partitions' offsets"):
        parse(subscribe="a", startingOffsets='{"a":"first"}')


@pytest.mark.parametrize(
    "options,message",
    [
        ({"startingOffsets": '{"a":"latest"}'}, "startingOffsets for topic a can't be latest \\(-1\\)"),
        ({"endingOffsets": '{"a":"earliest"}'}, "endingOffsets for topic a can't be earliest \\(-2\\)"),
        (
            {"startingOffsets": '{"a":{"0":1,"1":1}}', "endingOffsets": '{"a":{"0":5}}'},
            "The specified start offset and end offset should have the same topic-partitions. "
            "Topic-partitions for start offset: a-0, a-1, topic-partitions for end offset: a-0.",
        ),
        (
            {"startingOffsets": '{"a":{"0":7}}', "endingOffsets": '{"a":{"0":5}}'},
            "The specified start offset 7 is greater than the end offset 5 for topic a partition 0.",
        ),
        (
            {"startingOffsetsByTimestamp": '{"a":{"0":2000}}', "endingOffsetsByTimestamp": '{"a":{"0":1000}}'},
            "The specified start timestamp 2000 is greater than the end timestamp 1000 for topic a partition 0.",
        ),
    ],
)
def test_batch_checks_explicit_positions_before_reading(options, message):
    with pytest.raises(PylogOptionError, match=message):
        check_batch(parse(subscribe="a", **options))


def test_batch_allows_sentinels_on_either_side_of_explicit_positions():
    check_batch(parse(subscribe="a", startingOffsets='{"a":{"0":7}}', endingOffsets='{"a":{"0":-1}}'))
    check_batch(parse(subscribe="a", startingOffsets='{"a":{"0":-2}}', endingOffsets='{"a":{"0":3}}'))
