"""Token functions become confluent-kafka's token callback where a client is built: the first token
is asked for before the client exists (a failure is one line naming the function, secrets
masked), the answer is checked, and the options reach the function."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Consumer

from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.refusal import explain_refusal
from kafka_spark.client.token_provider import TokenLoginError, last_failure, with_token_callback
from kafka_spark.common.token_login import PROVIDER

SECRET = "idp-s3cret-Jw9"


def config(function: str, **options: str) -> dict:
    return {
        "bootstrap.servers": "127.0.0.1:9",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        PROVIDER: f"tests.support.token_functions:{function}",
        "sasl.oauthbearer.config": json.dumps(options),
    }


def test_the_first_token_is_fetched_before_the_client_and_handed_to_librdkafka_first():
    built = with_token_callback(config("with_principal", sub="svc-etl", lifetime="600"))
    assert PROVIDER not in built
    callback = built["oauth_cb"]
    assert callback.calls == 1  # asked when the config was built
    assert callback.options == {"sub": "svc-etl", "lifetime": "600", "bootstrap.servers": "127.0.0.1:9"}
    token, expiry, principal, extensions = callback("ignored")
    assert callback.calls == 1  # the first call gets the prefetched token
    assert principal == "svc-etl" and extensions == {"traceId": "t-1"}
    assert 590 < expiry - time.time() <= 600 and token.count(".") == 2
    callback("ignored")
    assert callback.calls == 2  # later calls (librdkafka's refreshes) ask again


def test_a_client_built_with_a_token_function_takes_its_token():
    consumer = Consumer(routed({**config("fixed"), "group.id": "g", "log_level": 0}))
    try:
        assert consumer.memberid() is None  # built; the callback's first token was accepted
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "function,message",
    [
        (
            "failing",
            "could not get a login token from the token function tests.support.token_functions:failing: "
            "RuntimeError: identity provider said no to secret ***",
        ),
        ("in_milliseconds", "returned an expiry in milliseconds; give seconds since the epoch"),
        ("NOT_CALLABLE", "is not a function"),
    ],
)
def test_a_token_function_that_gives_no_token_fails_the_build_in_one_line_without_secrets(function, message):
    started = time.monotonic()
    with pytest.raises(Exception) as failure:  # noqa: PT011 - the classes differ: checked below
        routed(config(function, clientSecret=SECRET))
    assert message in str(failure.value)
    assert SECRET not in str(failure.value) and "\n" not in str(failure.value)
    assert time.monotonic() - started < 5  # not confluent-kafka's 10 s wait for a first token
    if function != "NOT_CALLABLE":
        assert isinstance(failure.value, TokenLoginError)
        assert last_failure(f"tests.support.token_functions:{function}") == str(failure.value)
        # what librdkafka reports when a refresh fails is told with the function's reason
        assert explain_refusal(
            "Failed to acquire SASL OAUTHBEARER token: OAuth callback raised exception", "h:9092"
        ).startswith("could not get a login token from the token function")


def test_a_bad_token_function_reference_fails_where_the_query_is_defined(spark, pylog_oauth_broker):
    for reference, message in [
        ("tests.support.nowhere:token", "cannot import tests.support.nowhere"),
        ("tests.support.token_functions:nothing", "tests.support.token_functions has no nothing"),
        ("tokens", "is not a function reference: write it as package.module:function"),
    ]:
        reader = (
            spark.read.format("pylog")
            .option("kafka.bootstrap.servers", pylog_oauth_broker.bootstrap_servers)
            .option("kafka.security.protocol", "SASL_PLAINTEXT")
            .option("kafka.sasl.oauthbearer.token.provider", reference)
            .option("subscribe", "t")
        )
        with pytest.raises(Exception, match=re.escape(message)):  # noqa: PT011 - Spark wraps the error
            reader.load()
