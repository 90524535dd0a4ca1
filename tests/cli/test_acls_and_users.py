"""`pylog acls` and `pylog users` as a user runs them: against a broker started from a Kafka
server.properties with SASL and the ACL authorizer, authenticating with --command-config, as
kafka-acls and kafka-configs do."""

from __future__ import annotations

import subprocess
import sys

import pytest

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="{0}" password="{0}-secret";'


@pytest.fixture
def secured(tmp_path, pylog_broker_process):
    server = tmp_path / "server.properties"
    server.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        'required user_admin="admin-secret" user_alice="alice-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:admin\n"
    )
    configs = {}
    for user in ("admin", "alice"):
        configs[user] = tmp_path / f"{user}.properties"
        configs[user].write_text(
            f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS.format(user)}\n"
        )
    configs["carol"] = tmp_path / "carol.properties"
    configs["carol"].write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" '
        'password="carol-secret";\n'
    )
    broker = pylog_broker_process(str(server), port=None)
    bootstrap, env = broker.bootstrap_servers, broker.env

    def pylog(*args: str, user: str = "admin", stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "kafka_spark.cli",
                *args,
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                str(configs[user]),
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    return pylog


def test_acls_are_added_listed_and_removed_like_kafka_acls(secured):
    pylog = secured
    assert pylog("topics", "create", "orders").returncode == 0
    refused = pylog("produce", "orders", user="alice", stdin="x\n")  # no WRITE on the topic: delivery refused
    assert refused.returncode != 0 and "authorization failed" in refused.stderr.lower()
    added = pylog(
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--producer",
        "--consumer",
        "--topic",
        "orders",
        "--group",
        "orders-app",
    )
    assert added.returncode == 0, added.stderr
    listed = pylog("acls", "list", "--topic", "orders")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed.stdout
    for operation in ("WRITE", "READ", "DESCRIBE", "CREATE"):
        assert f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in listed.stdout
    assert pylog("produce", "orders", user="alice", stdin="one\n").returncode == 0
    consumed = pylog(
        "consume", "orders", "--from-beginning", "--max-messages", "1", "--group", "orders-app", user="alice"
    )
    assert consumed.stdout.split() == ["one"], consumed.stderr
    removed = pylog("acls", "remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert removed.returncode == 0 and "operation=WRITE" in removed.stdout
    assert pylog("produce", "orders", user="alice", stdin="two\n").returncode != 0
    assert "operation=WRITE" not in pylog("acls", "list", "--principal", "User:alice").stdout
    denied = pylog("acls", "add", "--allow-principal", "User:alice", "--operation", "All", "--cluster", user="alice")
    assert denied.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr


def test_users_get_scram_credentials_like_kafka_configs(secured):
    pylog = secured
    altered = pylog(
        "users", "alter", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=-]", stdin="carol-secret\n"
    )
    assert altered.returncode == 0, altered.stderr
    assert pylog("users", "describe", "carol").stdout.strip() == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192"
    )
    assert (
        pylog("acls", "add", "--allow-principal", "User:carol", "--operation", "Describe", "--topic", "*").returncode
        == 0
    )
    assert pylog("topics", "list", user="carol").returncode == 0  # signs in with the new credential
    # Both mechanisms at once: one request each (a broker refuses a user named twice in one request).
    both = pylog("users", "alter", "carol", "--add-config", "SCRAM-SHA-256=[password=x2],SCRAM-SHA-512=[password=x2]")
    assert both.returncode == 0, both.stderr
    assert pylog("users", "describe", "carol").stdout.strip() == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=4096"
    )
    assert pylog("users", "alter", "carol", "--delete-config", "SCRAM-SHA-256,SCRAM-SHA-512").returncode == 0
    assert "carol" not in pylog("users", "describe").stdout
    bad = pylog("users", "alter", "dave", "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")
    assert bad.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in bad.stderr
    malformed = pylog("users", "alter", "dave", "--add-config", "SCRAM-SHA-1=[password=x]")
    assert malformed.returncode == 1 and "is not SCRAM-SHA-256=" in malformed.stderr
