"""`pylog consume` against Apache Kafka as against pylog's broker: its own Fetch client
(--fetcher wire) prints the same bytes as confluent-kafka's consumer (--fetcher librdkafka) over
the record matrix of tests/cli/test_console_fetch.py, plus batches compressed by Kafka's Java
producer (snappy in its xerial framing, lz4)."""

from __future__ import annotations

import os

from tests.cli.test_console_fetch import OUTPUTS, both, processed, produce_matrix
from tests.interop.harness import Cluster
from tests.support.waiting import wait_until


def test_wire_and_librdkafka_fetchers_print_the_same_bytes(cluster: Cluster, tmp_path):
    topic = cluster.topic(partitions=1, prefix="console-fetch")
    count = produce_matrix(cluster.bootstrap_servers, topic)
    for codec in ("snappy", "lz4"):
        cluster.tool(
            "kafka-console-producer",
            "--topic",
            topic,
            "--producer-property",
            f"compression.type={codec}",
            input="".join(f"java-{codec}-{i}\n" for i in range(50)),
        )
    count += 100
    env = dict(os.environ, PYLOG_HOME=str(tmp_path))
    wait_until(  # the tool's producer may return before its records are readable
        lambda: (
            processed(both(cluster.bootstrap_servers, env, topic, "--from-beginning", "-e")[1]) == str(count).encode()
        ),
        f"{count} records readable",
        interval=0.2,
    )
    printed = {}
    for output in OUTPUTS[:3]:  # --print-key: tests/cli/test_console_fetch.py
        wire, librdkafka = both(cluster.bootstrap_servers, env, topic, "--from-beginning", "-e", *output)
        assert wire.stdout == librdkafka.stdout, output
        assert processed(wire) == processed(librdkafka) == str(count).encode(), output
        printed[output] = wire.stdout
    java = {b"java-%s-%d" % (codec, i) for codec in (b"snappy", b"lz4") for i in range(50)}
    assert java <= set(printed[()].splitlines())
    wire, librdkafka = both(cluster.bootstrap_servers, env, topic, "--from-beginning", "-c", "30")
    assert wire.stdout == librdkafka.stdout and len(wire.stdout.splitlines()) >= 30
