"""Kafka's Java client (4.3) logs in to pylog's OAUTHBEARER listener as Java users configure it:
Kafka's own OAuthBearerLoginCallbackHandler fetches client-credentials tokens from the local OIDC
provider (pylog_oidc), and the broker validates them against the provider's JWKS. Kafka's console
producer and consumer run on those settings; a token for another audience is refused, and the
Java client's error carries the broker's reason."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kafka_spark.testing_oidc import OidcProvider
from tests.interop.references import TOOLS, java_command

LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def java_client_config(path: Path, idp: OidcProvider, client_id: str, secret: str) -> Path:
    """The Java client settings a Spark job carries as kafka.* options, in a properties file."""
    path.write_text(
        "\n".join(
            [
                "security.protocol=SASL_PLAINTEXT",
                "sasl.mechanism=OAUTHBEARER",
                f"sasl.login.callback.handler.class={LOGIN_HANDLER}",
                f"sasl.oauthbearer.token.endpoint.url={idp.token_endpoint_url}",
                f'sasl.jaas.config={LOGIN_MODULE} required clientId="{client_id}" '
                f'clientSecret="{secret}" scope="kafka";',
            ]
        )
        + "\n"
    )
    path.chmod(0o600)
    return path


def tool(idp: OidcProvider, name: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """A Kafka tool in a JVM allowed to call the provider's token endpoint (Kafka 4 refuses
    token endpoint URLs not listed in this system property)."""
    command = java_command(TOOLS[name], *args)
    command.insert(1, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.token_endpoint_url}")
    return subprocess.run(command, input=input, capture_output=True, text=True, timeout=120)


def test_java_console_clients_log_in_with_kafkas_oidc_login_handler(pylog_oidc, pylog_oidc_broker, tmp_path):
    bootstrap = pylog_oidc_broker.bootstrap_servers
    pylog_oidc_broker.create_topic("java-oidc")
    config = java_client_config(
        tmp_path / "client.properties", pylog_oidc, pylog_oidc.client_id, pylog_oidc.client_secret
    )
    before = pylog_oidc.token_requests[pylog_oidc.client_id]
    produced = tool(
        pylog_oidc,
        "kafka-console-producer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "java-oidc",
        "--command-config",
        str(config),
        input="".join(f"java-{i}\n" for i in range(5)),
    )
    assert produced.returncode == 0, produced.stderr
    consumed = tool(
        pylog_oidc,
        "kafka-console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "java-oidc",
        "--from-beginning",
        "--max-messages",
        "5",
        "--timeout-ms",
        "30000",
        "--command-config",
        str(config),
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [f"java-{i}" for i in range(5)]
    assert pylog_oidc.token_requests[pylog_oidc.client_id] >= before + 2  # each JVM fetched its token


def test_the_java_client_is_told_why_its_token_was_refused(pylog_oidc, pylog_oidc_broker, tmp_path):
    client_id, secret = pylog_oidc.add_client("java-billing", scope="kafka", audience="billing")
    config = java_client_config(tmp_path / "billing.properties", pylog_oidc, client_id, secret)
    refused = tool(
        pylog_oidc,
        "kafka-topics",
        "--bootstrap-server",
        pylog_oidc_broker.bootstrap_servers,
        "--list",
        "--command-config",
        str(config),
    )
    assert refused.returncode != 0
    assert "SaslAuthenticationException" in refused.stderr
    assert "audience 'billing' is not the expected ['kafka']" in refused.stderr
    assert secret not in refused.stderr + refused.stdout
