"""pylog's connector and CLI log in with SASL/OAUTHBEARER as Spark jobs configure it, against
pylog's broker and Apache Kafka (both validating unsecured tokens): the source (driver and
executors) and the `pylog produce/consume/topics/groups` commands with an OIDC client-credentials
login (Kafka's OAuthBearerLoginCallbackHandler settings, a token endpoint on loopback), the topic
sink's transactions with Kafka's unsecured development login. The client secret and the tokens
are in none of the files the queries leave (checkpoints, _spark_metadata, sink manifests and
sidecars, outputs), in no query progress, listener event, plan, log line (this process's at debug
level, Spark's and its Python workers' output) or command output. A login that fails says which
step failed, in one line. (tests/read/test_oidc_login.py runs the driver's and the executors'
code at debug level, librdkafka's debug log included.)"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from pyspark.sql.streaming import StreamingQueryListener

from tests.interop.harness import OAuthCluster
from tests.support.cli_run import pylog
from tests.support.token_endpoint import TokenEndpoint

SECRET = "oidc-Cl1ent-S3cret-h7Q"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
OIDC_JAAS = f'{MODULE} required clientId="etl-job" clientSecret="{SECRET}" scope="kafka";'


@pytest.fixture(scope="module")
def idp():
    with TokenEndpoint({"etl-job": SECRET}) as endpoint:
        yield endpoint


def oidc(cluster: OAuthCluster, idp: TokenEndpoint) -> dict[str, str]:
    """Spark's kafka.* options of an OIDC login (Confluent Cloud's settings, a local endpoint)."""
    return {
        "kafka.bootstrap.servers": cluster.bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.login.callback.handler.class": HANDLER,
        "kafka.sasl.oauthbearer.token.endpoint.url": idp.url,
        "kafka.sasl.jaas.config": OIDC_JAAS,
    }


def unsecured(cluster: OAuthCluster, subject: str) -> dict[str, str]:
    """Kafka's unsecured development login."""
    return {
        "kafka.bootstrap.servers": cluster.bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="{subject}";',
    }


def command_config(path: Path, options: dict[str, str]) -> str:
    """A --command-config file: the same settings as Java client properties."""
    path.write_text(
        "".join(f"{k[len('kafka.') :]}={v}\n" for k, v in options.items() if k != "kafka.bootstrap.servers")
    )
    return str(path)


def cli(*args: str, config: str, cluster: OAuthCluster, stdin: bytes | None = None, check: bool = True):
    return pylog(
        *args,
        "--bootstrap-server",
        cluster.bootstrap_servers,
        "--command-config",
        config,
        env=dict(os.environ),
        stdin=stdin,
        check=check,
    )


class Events(StreamingQueryListener):
    """Every listener event, as JSON or text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def onQueryStarted(self, event) -> None:  # noqa: N802 - Spark's names
        self.seen.append(f"started {event.id} {event.name}")

    def onQueryProgress(self, event) -> None:  # noqa: N802
        self.seen.append(event.progress.json)

    def onQueryIdle(self, event) -> None:  # noqa: N802
        self.seen.append(f"idle {event.id}")

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        self.seen.append(f"terminated {event.id} {event.exception}")


def spark_output(request: pytest.FixtureRequest) -> str:
    """What Spark's JVM and its Python workers (the executors) wrote since the last call: they
    inherited pytest's capture file at the session's start. Empty when pytest runs with -s."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None or not capture.is_globally_capturing():
        return ""
    out, err = capture.read_global_capture()
    sys.stdout.write(out)  # still shown with the test's report
    sys.stderr.write(err)
    return out + err


def test_source_sinks_and_cli_log_in_with_oauthbearer_and_leave_no_secret_anywhere(
    spark, oauth_cluster: OAuthCluster, idp: TokenEndpoint, tmp_path, caplog, request
):
    import logging

    spark_output(request)
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    cluster = oauth_cluster
    source, copy = f"oauth-orders-{cluster.name}", f"oauth-copy-{cluster.name}"
    cluster.create_topic(source, 2)
    cluster.create_topic(copy, 2)
    login = oidc(cluster, idp)
    config = command_config(tmp_path / "client.properties", login)
    tokens_before = len(idp.tokens)
    outputs = []

    produced = cli(
        "produce", source, config=config, cluster=cluster, stdin=b"".join(b"order-%d\n" % i for i in range(40))
    )
    outputs.append(produced.stdout + produced.stderr)

    batch = spark.read.format("pylog").options(**login).option("subscribe", source).load()
    assert sorted(row.value.decode() for row in batch.select("value").collect()) == sorted(
        f"order-{i}" for i in range(40)
    )

    events = Events()
    spark.streams.addListener(events)
    try:
        stream = (
            spark.readStream.format("pylog")
            .options(**login)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        queries = [
            stream.writeStream.format("pylog-files")
            .option("checkpointLocation", str(tmp_path / "checkpoint-files"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "files")),
            stream.selectExpr("key", "value")
            .writeStream.format("pylog")
            .options(**unsecured(cluster, "writer"))
            .option("topic", copy)
            .option("checkpointLocation", str(tmp_path / "checkpoint-topic"))
            .trigger(availableNow=True)
            .start(),
        ]
        progress = []
        for query in queries:
            assert query.awaitTermination(180)
            assert query.exception() is None
            progress += [json.dumps(p, default=str) for p in query.recentProgress]
            outputs.append(query._jsq.toString() + query._jsq.explainInternal(True))
    finally:
        spark.streams.removeListener(events)
    assert spark.read.parquet(str(tmp_path / "files")).count() == 40

    consumed = cli(
        "consume",
        copy,
        "--group",
        f"oauth-readers-{cluster.name}",
        "--from-beginning",
        "-c",
        "40",
        config=config,
        cluster=cluster,
    )
    assert sorted(consumed.stdout.decode().split()) == sorted(f"order-{i}" for i in range(40))
    listed = cli("topics", "list", config=config, cluster=cluster)
    assert {source, copy} <= set(listed.stdout.decode().split())
    described = cli("groups", "describe", f"oauth-readers-{cluster.name}", config=config, cluster=cluster)
    assert copy in described.stdout.decode()
    outputs += [r.stdout + r.stderr for r in (consumed, listed, described)]

    tokens = idp.tokens[tokens_before:]
    assert len(tokens) >= 3, "the CLI, the driver and the executors logged in through the token endpoint"
    texts = {
        "log": caplog.text,
        "progress": "\n".join(progress),
        "listener events": "\n".join(events.seen),
        "queries and plans": "\n".join(o if isinstance(o, str) else o.decode() for o in outputs),
        "spark's and the executors' output": spark_output(request),
    }
    assert events.seen and progress
    for name, text in texts.items():
        assert SECRET not in text, name
        assert not any(token in text for token in tokens), name
    config_file = Path(config)
    leaked = [
        str(path)
        for path in tmp_path.rglob("*")
        if path.is_file()
        and path != config_file
        and (SECRET.encode() in path.read_bytes() or any(t.encode() in path.read_bytes() for t in tokens))
    ]
    assert leaked == []
    assert {p.name for p in tmp_path.rglob("*")} >= {"_spark_metadata", "offsets", "commits", "_sink"}, (
        "files were written"
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_failed_login_names_its_step_in_one_line(spark, oauth_cluster: OAuthCluster, idp: TokenEndpoint, tmp_path):
    cluster = oauth_cluster
    login = oidc(cluster, idp)
    cases = [
        (
            {**login, "kafka.sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:{closed_port()}/token"},
            "pylog: could not get a login token: the OIDC token endpoint is unreachable (",
        ),
        (
            {**login, "kafka.sasl.jaas.config": OIDC_JAAS.replace(SECRET, "not-the-secret")},
            "pylog: could not get a login token: the OIDC token endpoint refused the request (",
        ),
        (
            {
                **unsecured(cluster, "x"),
                "kafka.sasl.oauthbearer.token.provider": "tests.support.token_functions:expired_claim",
            },
            f"pylog: {cluster.bootstrap_servers} rejected the login token (",
        ),
    ]
    for i, (options, message) in enumerate(cases):
        failed = cli("topics", "list", config=command_config(tmp_path / f"c{i}", options), cluster=cluster, check=False)
        assert failed.returncode == 1
        lines = failed.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), failed.stderr.decode()
        assert SECRET not in lines[0] and "not-the-secret" not in lines[0]

    with pytest.raises(Exception) as refused:  # noqa: PT011 - Spark wraps the source's error
        spark.read.format("pylog").options(**cases[2][0]).option("subscribe", "t").load().count()
    assert f"{cluster.bootstrap_servers} rejected the login token" in str(refused.value)
