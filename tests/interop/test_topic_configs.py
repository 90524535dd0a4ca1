"""Topic configs on pylog's broker and on Apache Kafka 4.3.1: Kafka's own validation cases fed to
both, which must accept and refuse the same values, describe what they accepted as Kafka writes
it, and apply incremental changes alike.

The cases are data taken from apache/kafka's tests: ``LogConfigTest`` (``testFromPropsInvalid``'s
invalid values per config, ``shouldValidateThrottledReplicasConfig``,
``testInvalidCompactionLagConfig``, the tiered-storage cases of a broker without tiered storage,
``testValidRemoteLogCopyDisabled`` / ``DeleteOnDisable``), the empty ``cleanup.policy`` of
KAFKA-19112 and ``ConfigDef``'s parsing (Java number syntax, trimming, case). Each case is written
with the outcome Kafka 4.3.1 gives: the values DescribeConfigs then shows, or the error message.
"""

from __future__ import annotations

import itertools
import re
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.interop.harness import Cluster
from tests.support.wire import WireClient

_names = itertools.count()
INVALID_CONFIG = 40

# Per config: the values testFromPropsInvalid expects Kafka to refuse, with the reason Kafka gives.
_NOT_LONG, _NOT_INT, _NOT_BOOL = "Not a number of type LONG", "Not a number of type INT", "Expected value to be"
_THROTTLED = "must be the literal '*' or a list of replicas"
INVALID_VALUES = {
    "cleanup.policy": {"true": "String must be one of: compact, delete", "foobar": "String must be one of"},
    "compression.gzip.level": {"not_a_number": _NOT_INT, "-2": "between 1 and 9 or equal to -1"},
    "compression.lz4.level": {"not_a_number": _NOT_INT, "-1": "Value must be at least 1"},
    "compression.type": {"not_a_number": "String must be one of", "-1": "String must be one of"},
    "compression.zstd.level": {"not_a_number": _NOT_INT, "-0.1": _NOT_INT},
    "delete.retention.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "file.delete.delay.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "flush.messages": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 1"},
    "flush.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "follower.replication.throttled.replicas": {"not_a_number": _THROTTLED, "-1": _THROTTLED},
    "index.interval.bytes": {"not_a_number": _NOT_INT, "-1": "Value must be at least 0"},
    "leader.replication.throttled.replicas": {"not_a_number": _THROTTLED, "-1": _THROTTLED},
    "local.retention.bytes": {"not_a_number": _NOT_LONG, "-3": "Value must be at least -2"},
    "local.retention.ms": {"not_a_number": _NOT_LONG, "-3": "Value must be at least -2"},
    "max.compaction.lag.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 1"},
    "max.message.bytes": {"not_a_number": _NOT_INT, "-1": "Value must be at least 0"},
    "message.timestamp.after.max.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "message.timestamp.before.max.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "message.timestamp.type": {"not_a_number": "String must be one of", "-1": "String must be one of"},
    "min.cleanable.dirty.ratio": {
        "not_a_number": "Not a number of type DOUBLE",
        "-0.1": "Value must be at least 0",
        "1.2": "Value must be no more than 1",
    },
    "min.compaction.lag.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "min.insync.replicas": {"not_a_number": _NOT_INT, "0": "at least 1", "-1": "at least 1"},
    "preallocate": {"not_a_number": _NOT_BOOL, "-1": _NOT_BOOL},
    "remote.log.copy.disable": {"not_a_number": _NOT_BOOL, "remove": _NOT_BOOL, "0": _NOT_BOOL},
    "remote.log.delete.on.disable": {"not_a_number": _NOT_BOOL, "remove": _NOT_BOOL, "0": _NOT_BOOL},
    "remote.storage.enable": {"not a boolean": _NOT_BOOL},
    "retention.bytes": {"not_a_number": _NOT_LONG},
    "retention.ms": {"not_a_number": _NOT_LONG},
    "segment.bytes": {"not_a_number": _NOT_INT, "-1": "Value must be at least 1048576"},
    "segment.index.bytes": {"not_a_number": _NOT_INT, "-1": "Value must be at least 4"},
    "segment.jitter.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 0"},
    "segment.ms": {"not_a_number": _NOT_LONG, "-1": "Value must be at least 1"},
    "unclean.leader.election.enable": {"not a boolean": _NOT_BOOL},
}

# (configs, what Kafka does): a dict = accepted, and what DescribeConfigs shows; a str = refused
# (INVALID_CONFIG) with a message containing it.
CASES: list[tuple[dict[str, str], dict[str, str] | str]] = [
    *(({name: value}, reason) for name, values in INVALID_VALUES.items() for value, reason in values.items()),
    # shouldValidateThrottledReplicasConfig, for both lists
    *(
        ({name: value}, {name: shown})
        for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
        for value, shown in [
            ("*", "*"),
            ("* ", "*"),
            ("", ""),
            (" ", ""),
            ("100:10", "100:10"),
            ("100:10,12:10", "100:10,12:10"),
            ("100:10,12:10,15:1", "100:10,12:10,15:1"),
            ("100:10,12:10,15:1  ", "100:10,12:10,15:1"),
            ("100:0,", "100:0,"),
        ]
    ),
    *(
        ({name: value}, _THROTTLED)
        for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
        for value in ["100", "100:", "100:0,10", "100:0,10:", "100:0,10:   ", "100 :0,10:   ", "*,100:10", "* ,100:10"]
    ),
    # testInvalidCompactionLagConfig
    ({"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "200"}, "conflict topic config setting"),
    ({"max.compaction.lag.ms": "200", "min.compaction.lag.ms": "200"}, {"max.compaction.lag.ms": "200"}),
    # tiered storage, on a broker without it (testEnableRemoteLogStorage(false) and friends)
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"remote.storage.enable": "false"}, {"remote.storage.enable": "false"}),
    ({"remote.storage.enable": "false", "retention.ms": "500"}, {"retention.ms": "500"}),
    ({"remote.log.copy.disable": "true"}, {"remote.log.copy.disable": "true"}),
    ({"remote.log.delete.on.disable": "true"}, {"remote.log.delete.on.disable": "true"}),
    ({"local.retention.ms": "1000", "retention.ms": "500"}, {"local.retention.ms": "1000"}),
    # cleanup.policy: a list of distinct known policies, possibly empty (KAFKA-19112)
    ({"cleanup.policy": ""}, {"cleanup.policy": ""}),
    ({"cleanup.policy": " "}, {"cleanup.policy": ""}),
    ({"cleanup.policy": "delete,delete,delete"}, {"cleanup.policy": "delete"}),
    ({"cleanup.policy": "delete,compact"}, {"cleanup.policy": "delete,compact"}),
    ({"cleanup.policy": " compact , delete "}, {"cleanup.policy": "compact,delete"}),
    ({"cleanup.policy": "Delete"}, "String must be one of: compact, delete"),
    ({"cleanup.policy": "delete,"}, "Configuration 'cleanup.policy' values must not be empty."),
    # ConfigDef's parsing: Java's number syntax, trimming, case
    ({"retention.ms": "+5"}, {"retention.ms": "5"}),
    ({"retention.ms": " 5 "}, {"retention.ms": "5"}),
    ({"retention.ms": "010"}, {"retention.ms": "10"}),
    ({"retention.ms": "1_000"}, _NOT_LONG),
    ({"retention.ms": "0x10"}, _NOT_LONG),
    ({"retention.ms": ""}, _NOT_LONG),
    ({"retention.ms": "-2"}, "Value must be at least -1"),
    ({"retention.bytes": "-5"}, {"retention.bytes": "-5"}),
    ({"flush.ms": "9223372036854775808"}, _NOT_LONG),
    ({"segment.bytes": "2147483648"}, _NOT_INT),
    ({"segment.bytes": "1048575"}, "Value must be at least 1048576"),
    ({"segment.bytes": "\t2000000\n"}, {"segment.bytes": "2000000"}),
    ({"internal.segment.bytes": "1024"}, {"internal.segment.bytes": "1024"}),
    ({"segment.index.bytes": "4"}, {"segment.index.bytes": "4"}),
    ({"min.cleanable.dirty.ratio": "1"}, {"min.cleanable.dirty.ratio": "1.0"}),
    ({"min.cleanable.dirty.ratio": "1e-1"}, {"min.cleanable.dirty.ratio": "0.1"}),
    ({"min.cleanable.dirty.ratio": "0.0001"}, {"min.cleanable.dirty.ratio": "1.0E-4"}),
    ({"min.cleanable.dirty.ratio": "0.5d"}, {"min.cleanable.dirty.ratio": "0.5"}),
    ({"min.cleanable.dirty.ratio": "0x1p-2"}, {"min.cleanable.dirty.ratio": "0.25"}),
    ({"min.cleanable.dirty.ratio": "NaN"}, {"min.cleanable.dirty.ratio": "NaN"}),
    ({"min.cleanable.dirty.ratio": "nan"}, "Not a number of type DOUBLE"),
    ({"compression.type": " gzip "}, {"compression.type": "gzip"}),
    ({"compression.type": "GZIP"}, "String must be one of"),
    ({"compression.gzip.level": "0"}, "between 1 and 9 or equal to -1"),
    ({"message.timestamp.type": "createtime"}, "String must be one of: CreateTime, LogAppendTime"),
    ({"preallocate": "TRUE"}, {"preallocate": "true"}),
    ({"preallocate": " False "}, {"preallocate": "false"}),
    ({"max.message.bytes": "0"}, {"max.message.bytes": "0"}),
    ({"min.insync.replicas": "2"}, {"min.insync.replicas": "2"}),
    ({"unclean.leader.election.enable": "true"}, {"unclean.leader.election.enable": "true"}),
    ({"segment.jitter.ms": "1000", "file.delete.delay.ms": "12345"}, {"file.delete.delay.ms": "12345"}),
    # names Kafka 4 removed, and names it never had
    ({"message.timestamp.difference.max.ms": "1000"}, "Unknown topic config name: message.timestamp.difference"),
    ({"message.downconversion.enable": "true"}, "Unknown topic config name: message.downconversion.enable"),
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
]

# What a topic created without configs shows: Kafka 4.3.1's topic configs and defaults.
DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def _admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _name(cluster: Cluster) -> str:
    return f"configs-{cluster.name}-{next(_names)}-{int(time.time() * 1000) % 100000}"


def _describe(admin: AdminClient, topics: list[str]) -> dict[str, dict]:
    """Each topic's config entries (retried while a new topic's metadata spreads: Kafka answers
    UNKNOWN_TOPIC_OR_PARTITION for a moment after creating it)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            futures = admin.describe_configs([ConfigResource("topic", topic) for topic in topics])
            return {resource.name: future.result(30) for resource, future in futures.items()}
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _shown_value(admin: AdminClient, topic: str, name: str, expected: str | None) -> str | None:
    """The value DescribeConfigs shows for ``name``, asked again while it is not ``expected`` for
    up to a minute (Kafka's brokers apply a change when its metadata record reaches them, which a
    loaded machine delays)."""
    deadline = time.monotonic() + 60
    while True:
        entries = _describe(admin, [topic])[topic]
        value = entries[name].value if name in entries else None
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def _error(future) -> tuple[int, str]:
    try:
        future.result(30)
    except KafkaException as exception:
        error = exception.args[0]
        return error.code(), error.str()
    return 0, ""


def test_kafkas_topic_config_validation_cases_give_kafkas_answers(cluster: Cluster):
    """Every case in one CreateTopics request: refused ones name Kafka's reason, accepted ones are
    described with the values Kafka shows."""
    admin = _admin(cluster)
    topics = {_name(cluster): case for case in CASES}
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=configs) for topic, (configs, _) in topics.items()])
    created, wrong = [], []
    for topic, future in futures.items():
        configs, expected = topics[topic]
        code, message = _error(future)
        if isinstance(expected, str):
            if code != INVALID_CONFIG or expected not in message:
                wrong.append((configs, f"expected refusal {expected!r}", code, message))
        elif code:
            wrong.append((configs, "expected acceptance", code, message))
        else:
            created.append(topic)
    described = _describe(admin, created) if created else {}
    for topic in created:
        configs, expected = topics[topic]
        shown = {name: entry.value for name, entry in described[topic].items()}
        if any(shown.get(name) != value for name, value in expected.items()):
            wrong.append((configs, f"expected described {expected}", {name: shown.get(name) for name in expected}))
    admin.delete_topics(created)
    assert not wrong, "\n".join(map(str, wrong))


def test_a_new_topic_lists_kafkas_topic_configs_with_kafkas_defaults(cluster: Cluster):
    admin = _admin(cluster)
    topic = _name(cluster)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    entries = _describe(admin, [topic])[topic]
    assert {name: entry.value for name, entry in entries.items()} == DEFAULTS
    # KIP-966: Kafka 4.1+ writes the cluster's min.insync.replicas as a cluster-level config
    assert entries["min.insync.replicas"].source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert all(entry.source == 5 for name, entry in entries.items() if name != "min.insync.replicas")


def test_alter_configs_keeps_every_config_it_accepts(cluster: Cluster):
    """confluent-kafka-python's test_basic_operations sets file.delete.delay.ms with the legacy
    AlterConfigs and finds it in DescribeConfigs, as every config a broker accepts must be."""
    admin = _admin(cluster)
    topic = _name(cluster)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _describe(admin, [topic])
    resource = ConfigResource("topic", topic, set_config={"file.delete.delay.ms": "12345", "preallocate": "true"})
    with pytest.warns(DeprecationWarning):  # confluent-kafka prefers incremental_alter_configs
        admin.alter_configs([resource])[resource].result(30)
    # Kafka shows the change once its metadata record reaches the broker answering
    assert _shown_value(admin, topic, "file.delete.delay.ms", "12345") == "12345", cluster.name
    assert _shown_value(admin, topic, "preallocate", "true") == "true", cluster.name
    entries = _describe(admin, [topic])[topic]
    assert (entries["file.delete.delay.ms"].value, entries["file.delete.delay.ms"].source) == ("12345", 1)
    assert (entries["preallocate"].value, entries["preallocate"].source) == ("true", 1)


def test_incremental_alter_configs_edit_lists_as_kafka_does(cluster: Cluster):
    """SET, APPEND, SUBTRACT and DELETE in turn, with the value Kafka shows after each, and the
    changes Kafka refuses (nothing changes then)."""
    admin = _admin(cluster)
    topic = _name(cluster)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _describe(admin, [topic])
    set_, append, subtract, delete = (
        AlterConfigOpType.SET,
        AlterConfigOpType.APPEND,
        AlterConfigOpType.SUBTRACT,
        AlterConfigOpType.DELETE,
    )
    # (config, value, operation, the value shown after it, or Kafka's reason for refusing it)
    shown, refused = "shown", "refused"
    steps = [
        ("cleanup.policy", "", set_, shown, ""),
        ("cleanup.policy", "compact", append, shown, "compact"),
        ("cleanup.policy", "delete", append, shown, "compact,delete"),
        ("cleanup.policy", "compact", append, shown, "compact,delete"),
        ("cleanup.policy", "compact", subtract, shown, "delete"),
        ("cleanup.policy", "delete", subtract, shown, ""),
        ("cleanup.policy", "foo", append, refused, "String must be one of: compact, delete"),
        ("cleanup.policy", None, delete, shown, "delete"),
        ("cleanup.policy", "compact,delete", append, shown, "delete,compact"),
        ("leader.replication.throttled.replicas", "0:1", append, shown, "0:1"),
        ("leader.replication.throttled.replicas", "1:1", append, shown, "0:1,1:1"),
        ("leader.replication.throttled.replicas", "0:1", subtract, shown, "1:1"),
        ("retention.ms", "5", append, refused, "Can't APPEND to key retention.ms because its type is not LIST."),
        ("retention.ms", " +5", set_, shown, "5"),
        ("retention.ms", "", set_, refused, _NOT_LONG),
        ("retention.ms", None, delete, shown, "604800000"),
        ("no.such", "1", set_, refused, "Unknown topic config name: no.such"),
        ("no.such", None, delete, shown, None),
    ]
    wrong = []
    for name, value, operation, outcome, expected in steps:
        entry = ConfigEntry(name, value, incremental_operation=operation)
        resource = ConfigResource("topic", topic, incremental_configs=[entry])
        code, message = _error(admin.incremental_alter_configs([resource])[resource])
        if outcome == refused:
            if code != INVALID_CONFIG or expected not in message:
                wrong.append((name, value, operation.name, expected, code, message))
        elif code:
            wrong.append((name, value, operation.name, expected, code, message))
        else:
            value_now = _shown_value(admin, topic, name, expected)
            if value_now != expected:
                wrong.append((name, value, operation.name, expected, value_now))
    assert not wrong, "\n".join(map(str, wrong))


def test_a_null_config_value_in_create_topics_is_invalid(cluster: Cluster):
    host_port = cluster.bootstrap_servers.split(",")[0]
    with WireClient(host_port) as client:
        response = client.call(
            19,
            7,
            {
                "topics": [
                    {
                        "name": _name(cluster),
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "retention.ms", "value": None}],
                    }
                ],
                "timeout": 30_000,
                "validate_only": True,
            },
        )
    (topic,) = response.topics
    assert (topic.error_code, topic.error_message) == (
        INVALID_CONFIG,
        "Null value not supported for topic configs: retention.ms",
    )


def test_kafka_tools_show_the_same_topic_and_broker_configs(cluster: Cluster):
    """kafka-configs and kafka-topics print what Kafka prints: every topic config with its
    synonyms, and the cluster's min.insync.replicas as the brokers' dynamic default."""
    topic = cluster.topic()
    every = cluster.tool("kafka-configs", "--entity-type", "topics", "--entity-name", topic, "--describe", "--all")
    shown = dict(re.findall(r"^\s+([a-z0-9.]+)=(\S*) sensitive=false", every.stdout, re.MULTILINE))
    assert shown == DEFAULTS, every.stdout
    for line in (
        "min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, "
        "DEFAULT_CONFIG:min.insync.replicas=1}",
        "segment.ms=604800000 sensitive=false synonyms={}",  # Kafka's log.roll.ms has no default
        "file.delete.delay.ms=60000 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.delete.delay.ms=60000}",
    ):
        assert f"  {line}\n" in every.stdout, (line, every.stdout)
    described = cluster.tool("kafka-topics", "--describe", "--topic", topic).stdout
    assert "\tConfigs: min.insync.replicas=1\n" in described, described
    brokers = cluster.tool("kafka-configs", "--entity-type", "brokers", "--describe").stdout
    assert brokers.endswith(
        "Default configs for brokers in the cluster are:\n"
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}\n"
    ), brokers
