"""Broker settings by Kafka's server.properties names: the file reader, the mapping, and
`pylog broker start FILE --override K=V` as a Kafka user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.properties import broker_options, parse_override, read_properties
from kafka_spark.broker.storage.errors import InvalidConfigError
from tests.support.waiting import wait_until

# Kafka's KRaft config/server.properties, as shipped (comments trimmed), with a test's log dir.
STOCK_KRAFT = """\
    ############################# Server Basics #############################
    process.roles=broker,controller
    node.id=1
    controller.quorum.bootstrap.servers=localhost:9093
    listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://:9093
    inter.broker.listener.name=PLAINTEXT
    advertised.listeners=PLAINTEXT://localhost:0,CONTROLLER://localhost:9093
    controller.listener.names=CONTROLLER
    listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
    num.network.threads=3
    num.io.threads=8
    socket.send.buffer.bytes=102400
    socket.receive.buffer.bytes=102400
    socket.request.max.bytes=104857600
    log.dirs={log_dir}
    num.partitions=3
    num.recovery.threads.per.data.dir=1
    offsets.topic.replication.factor=1
    share.coordinator.state.topic.replication.factor=1
    share.coordinator.state.topic.min.isr=1
    transaction.state.log.replication.factor=1
    transaction.state.log.min.isr=1
    log.retention.hours=168
    log.segment.bytes=1073741824
    log.retention.check.interval.ms=300000
"""


def test_properties_files_read_as_java_reads_them(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "# comment\n! also a comment\n\nlog.dirs = /data/a\nnum.partitions: 4\n"
        "log.retention.hours 24\nlisteners=PLAINTEXT://\\\n   127.0.0.1:9092\nempty=\n"
    )
    assert read_properties(path) == {
        "log.dirs": "/data/a",
        "num.partitions": "4",
        "log.retention.hours": "24",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "empty": "",
    }


def test_kafka_names_map_to_the_broker_settings():
    options = broker_options(
        {
            "log.dirs": "/data/pylog",
            "listeners": "PLAINTEXT://0.0.0.0:19092",
            "advertised.listeners": "PLAINTEXT://broker.example:19092",
            "num.partitions": "6",
            "auto.create.topics.enable": "false",
            "node.id": "7",
            "log.retention.minutes": "90",
            "log.retention.hours": "5",
            "log.roll.hours": "2",
            "log.segment.bytes": "1048576",
            "log.cleanup.policy": "compact",
            "message.max.bytes": "2000000",
            "log.flush.on.ack.all": "false",
            "log.flush.interval.messages": "1000",
            "transactional.id.expiration.ms": "60000",
            "min.insync.replicas": "2",
            "socket.request.max.bytes": "2000000",
            "queued.max.request.bytes": "-1",
            "log.flush.timeout.ms": "30000",
            "log.flush.io.uring.entries": "64",
            "socket.send.buffer.bytes": "-1",
            "socket.receive.buffer.bytes": "262144",
        }
    )
    settings = options.settings
    log = settings.pop("log_config")
    assert settings == {
        "log_dir": "/data/pylog",
        "host": "0.0.0.0",
        "port": 19092,
        "advertised_host": "broker.example",
        "num_partitions": 6,
        "auto_create_topics": False,
        "node_id": 7,
        "transactional_id_expiration_ms": 60000,
        "socket_request_max_bytes": 2_000_000,
        "queued_max_request_bytes": -1,
        "log_flush_timeout_ms": 30000,
        "log_flush_io_uring_entries": 64,
        "socket_send_buffer_bytes": -1,
        "socket_receive_buffer_bytes": 262_144,
    }
    assert log.retention_ms == 90 * 60_000  # the finer unit wins, as in Kafka
    assert log.segment_ms == 2 * 3_600_000 and log.segment_bytes == 1048576
    assert log.cleanup_policy == "compact" and log.max_message_bytes == 2_000_000
    assert log.flush_on_ack_all is False and log.flush_messages == 1000
    assert options.ignored == ["min.insync.replicas"]
    assert broker_options({"log.retention.hours": "-1"}).settings["log_config"].retention_ms == -1
    assert broker_options({}).settings == {}


@pytest.mark.parametrize(
    "properties, message",
    [
        ({"log.retention.hourz": "1"}, "log.retention.hourz (did you mean log.retention.hours?)"),
        ({"num.partitions": "three"}, "num.partitions='three' is invalid"),
        ({"log.cleanup.policy": "zap"}, "Invalid value zap for configuration log.cleanup.policy: String must be"),
        ({"log.segment.bytes": "1"}, "configuration log.segment.bytes: Value must be at least 1048576"),
        ({"log.cleaner.delete.retention.ms": "-5"}, "configuration log.cleaner.delete.retention.ms: Value must be"),
        ({"log.retention.bytes": "lots"}, "Invalid value lots for configuration log.retention.bytes: Not a number"),
        ({"log.flush.on.ack.all": "maybe"}, "log.flush.on.ack.all='maybe' is invalid: use true or false"),
        ({"log.dirs": "/a,/b"}, "give exactly one"),
        ({"socket.request.max.bytes": "4"}, "socket.request.max.bytes=4 is invalid: the largest request accepted"),
        ({"queued.max.request.bytes": "0"}, "queued.max.request.bytes=0 is invalid"),
        ({"log.flush.timeout.ms": "0"}, "log.flush.timeout.ms=0 is invalid"),
        ({"socket.send.buffer.bytes": "0"}, "socket.send.buffer.bytes=0 is invalid: a connection's socket send"),
        ({"socket.receive.buffer.bytes": "-2"}, "socket.receive.buffer.bytes=-2 is invalid: a connection's socket"),
        (
            {"log.flush.io.uring.entries": "65536"},
            "log.flush.io.uring.entries=65536 is invalid: entries of the fsync ring",
        ),
        ({"listeners": "SSL://:9093"}, "uses TLS but ssl.keystore.location is not set"),
        ({"listeners": "SSL://:9093", "ssl.keystore.location": "/ks.jks"}, "ssl.keystore.type=JKS: pylog reads PEM"),
        (
            {
                "listeners": "SSL://:9093",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/ks.pem",
                "ssl.client.auth": "required",
            },
            "ssl.client.auth needs ssl.truststore.location",
        ),
        ({"listeners": "WEIRD://:9093"}, "map it in listener.security.protocol.map"),
        (
            {
                "listeners": "PLAINTEXT://:9092,INTERNAL://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            },
            "exactly one listener",
        ),
        ({"listeners": "PLAINTEXT://localhost"}, "has no port"),
        ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://h:9093"}, "differs from the listener"),
    ],
)
def test_bad_settings_name_the_key_and_the_fix(properties, message):
    with pytest.raises(InvalidConfigError) as error:
        broker_options(properties)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({}, (524_288, None)),  # pylog's defaults (config.py says why)
        ({"socket.send.buffer.bytes": "262144", "socket.receive.buffer.bytes": "300000"}, (262_144, 300_000)),
        ({"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "102400"}, (None, 102_400)),  # Kafka's
    ],
)
def test_socket_buffer_settings_apply_to_every_client_connection(tmp_path, settings, expected):
    """Kafka's socket.send.buffer.bytes and socket.receive.buffer.bytes set SO_SNDBUF and
    SO_RCVBUF of the broker's end of each connection (Linux reports twice the size set, its
    bookkeeping included); -1 (None here) leaves one to the operating system, which starts it at
    another size and tunes it as data flows."""
    import socket

    with EmbeddedBroker(log_dir=tmp_path, register=False, **broker_options(settings).settings) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port))):
            wait_until(lambda: broker._server.connections, "the broker to accept the connection", interval=0.01)
            (connection,) = broker._server.connections
            sock = connection.transport.get_extra_info("socket")
            sizes = (
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            )
    for size, wanted in zip(sizes, expected, strict=True):
        if wanted is None:
            assert size not in (2 * 102_400, 2 * 524_288), sizes  # the OS's own size, not one set
        else:
            assert size == 2 * wanted, sizes


def test_override_needs_key_and_value():
    assert parse_override("log.retention.hours = 24") == ("log.retention.hours", "24")
    with pytest.raises(InvalidConfigError, match="is not KEY=VALUE"):
        parse_override("log.retention.hours")


def test_flush_on_ack_all_off_acknowledges_acks_all_without_waiting_for_fsync(tmp_path, monkeypatch):
    """The one pylog-specific key: with it off, acks=all produces are answered without an fsync
    (Kafka's own policy); by default each waits for one."""
    waits = {}
    for value in ("true", "false"):
        with EmbeddedBroker(
            log_dir=tmp_path / value, register=False, **broker_options({"log.flush.on.ack.all": value}).settings
        ) as broker:
            broker.create_topic("t", partitions=1)
            group_commit = broker.broker.group_commit
            calls = []
            real = group_commit.wait_durable
            monkeypatch.setattr(
                group_commit, "wait_durable", lambda *a, calls=calls, real=real: calls.append(a) or real(*a)
            )
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0})
            for i in range(5):
                producer.produce("t", b"v%d" % i)
                producer.flush(10)
            assert producer.flush(10) == 0
            waits[value] = len(calls)
    assert waits == {"true": 5, "false": 0}


def _broker_configs(bootstrap: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (node_id,) = admin.list_topics(timeout=10).brokers
    resource = ConfigResource("broker", str(node_id))
    entries = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in entries.items()}


def test_kafkas_stock_server_properties_starts_a_broker(tmp_path, pylog_broker_process):
    """Kafka's own KRaft server.properties works unchanged (with a log dir of the test's): what
    pylog has is applied, replication and controller settings are reported as ignored."""
    config = tmp_path / "server.properties"
    config.write_text(textwrap.dedent(STOCK_KRAFT).format(log_dir=tmp_path / "kraft-logs"))
    broker = pylog_broker_process(
        str(config),
        "--override",
        "log.flush.on.ack.all=false",
        "--override",
        "log.retention.hours=24",
        port=None,
        log_dir=None,
    )
    bootstrap = broker.bootstrap_servers
    try:
        assert bootstrap.startswith("localhost:")  # advertised.listeners
        configs = _broker_configs(bootstrap)
        assert configs["node.id"] == "1" and configs["num.partitions"] == "3"
        assert configs["log.retention.ms"] == str(24 * 3_600_000)  # the override wins over the file
        assert configs["log.flush.on.ack.all"] == "false"
        assert configs["log.dirs"] == str(tmp_path / "kraft-logs")
        assert configs["socket.send.buffer.bytes"] == configs["socket.receive.buffer.bytes"] == "102400"  # the file's
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("auto-created", b"hello")
        assert producer.flush(30) == 0
        assert {"auto-created-0", "auto-created-1", "auto-created-2"} <= set(os.listdir(tmp_path / "kraft-logs"))
    finally:
        assert broker.stop() == 0
    stderr = broker.stderr_text()
    assert "pylog: ignoring process.roles, controller.quorum.bootstrap.servers" in stderr
    assert "offsets.topic.replication.factor" in stderr


def test_command_line_options_win_over_the_file(tmp_path, pylog_broker_process):
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'from-file'}\nnum.partitions=3\nlisteners=PLAINTEXT://127.0.0.1:1\n")
    broker = pylog_broker_process(str(config), "--partitions", "2", port=0, log_dir=tmp_path / "flag")
    configs = _broker_configs(broker.bootstrap_servers)
    assert configs["num.partitions"] == "2" and configs["log.dirs"] == str(tmp_path / "flag")
    assert not broker.bootstrap_servers.endswith(":1")


def test_a_bad_setting_fails_before_anything_starts(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_spark.cli",
            "broker",
            "start",
            "--port",
            "0",
            "--log-dir",
            str(tmp_path / "d"),
            "--override",
            "num.partition=3",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYLOG_HOME=str(tmp_path / "home")),
    )
    assert result.returncode == 1 and result.stdout == ""
    assert "unknown broker setting(s) num.partition (did you mean num.partitions?)" in result.stderr
    assert not (tmp_path / "d").exists()
    missing = subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", "broker", "start", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "cannot read broker config" in missing.stderr
