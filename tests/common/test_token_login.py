"""OAUTHBEARER and AWS MSK IAM logins as Spark jobs write them (Java settings), in librdkafka's
terms: OIDC client credentials, Kafka's unsecured development login, MSK IAM and named token
functions; what cannot be translated is refused naming the setting, never a secret."""

from __future__ import annotations

import json
import re

import pytest

from kafka_spark.common.jaas import JaasConfigError, librdkafka_config
from kafka_spark.common.token_login import MSK_PROVIDER, PROVIDER, load_provider, provider_options
from kafka_spark.java_properties import CONSUMER, PRODUCER, KafkaConfigError, check_client_config, translate

SECRET = "cl1ent-s3cret-7Qx"
RETRIEVERS = "org.apache.kafka.common.security.oauthbearer"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
OLD_HANDLER = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
MSK_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
MSK_CLIENT = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
MSK_OAUTH = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"

#: Confluent Cloud's documented client settings (identity pool), as a Spark job carries them.
CONFLUENT_CLOUD = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
    "sasl.login.callback.handler.class": HANDLER,
    "sasl.jaas.config": (
        f"{MODULE} required clientId='etl-job' clientSecret='{SECRET}' scope='kafka' "
        "extension_logicalCluster='lkc-abc12' extension_identityPoolId='pool-XyZ';"
    ),
}


@pytest.mark.parametrize("handler", [HANDLER, OLD_HANDLER, f"kafkashaded.{HANDLER}", None])
def test_oidc_login_becomes_librdkafkas_oidc_method(handler):
    given = dict(CONFLUENT_CLOUD)
    if handler is None:  # no handler class: the token endpoint says it is OIDC
        del given["sasl.login.callback.handler.class"]
    else:
        given["sasl.login.callback.handler.class"] = handler
    client = translate(given, CONSUMER)
    assert client.librdkafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token",
        "sasl.oauthbearer.client.id": "etl-job",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-abc12,identityPoolId=pool-XyZ",
    }
    assert client.ignored == []
    assert client.origin["sasl.oauthbearer.client.secret"] == "sasl.jaas.config"
    check_client_config({**client.librdkafka, "group.id": "g"}, "consumer", client.origin, "test")


def test_kafka_41_client_credentials_settings_win_over_the_jaas_options():
    client = translate(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.oauthbearer.client.credentials.client.id": "from-config",
            "sasl.oauthbearer.client.credentials.client.secret": SECRET,
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.jwt.retriever.class": f"{RETRIEVERS}.ClientCredentialsJwtRetriever",
            "sasl.jaas.config": f'{MODULE} required clientId="from-jaas" clientSecret="other";',
        },
        PRODUCER,
    )
    assert client.librdkafka["sasl.oauthbearer.client.id"] == "from-config"
    assert client.librdkafka["sasl.oauthbearer.client.secret"] == SECRET


def test_jwt_bearer_retriever_becomes_librdkafkas_jwt_bearer_grant():
    client = translate(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.oauthbearer.jwt.retriever.class": f"{RETRIEVERS}.JwtBearerJwtRetriever",
            "sasl.oauthbearer.assertion.file": "/run/assertion.jwt",
            "sasl.jaas.config": f"{MODULE} required;",
        },
        CONSUMER,
    )
    assert client.librdkafka["sasl.oauthbearer.grant.type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    check_client_config({**client.librdkafka, "group.id": "g"}, "consumer", client.origin, "test")


def test_the_jaas_lines_trust_store_is_the_token_endpoints_ca():
    config = librdkafka_config(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": (
                f'{MODULE} required clientId="a" clientSecret="b" ssl.truststore.location="/etc/idp-ca.pem";'
            ),
        },
        prefix="",
    )
    assert config["https.ca.location"] == "/etc/idp-ca.pem"


@pytest.mark.parametrize(
    "jaas,expected",
    [
        ('unsecuredLoginStringClaim_sub="alice"', "principalClaimName=sub principal=alice"),
        (
            'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="|read|write" '
            'unsecuredLoginLifetimeSeconds="600" unsecuredLoginExtension_traceId="t1"',
            "principalClaimName=sub principal=alice scope=read,write lifeSeconds=600 extension_traceId=t1",
        ),
        (
            'unsecuredLoginPrincipalClaimName="azp" unsecuredLoginStringClaim_azp="svc" '
            'unsecuredLoginScopeClaimName="roles" unsecuredLoginStringClaim_roles="admin"',
            "principalClaimName=azp principal=svc scopeClaimName=roles scope=admin",
        ),
    ],
)
def test_kafkas_unsecured_login_becomes_librdkafkas_unsecured_jwt(jaas, expected):
    config = librdkafka_config({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{MODULE} required {jaas};"})
    assert config == {
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": expected,
    }
    check_client_config({**config, "group.id": "g"}, "consumer", {}, "test")


@pytest.mark.parametrize(
    "given",
    [
        {"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f"{MSK_MODULE} required;"},
        {
            "sasl.mechanism": "AWS_MSK_IAM",
            "sasl.jaas.config": f"{MSK_MODULE} required;",
            "sasl.client.callback.handler.class": MSK_CLIENT,
        },
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f"{MODULE} required;",
            "sasl.login.callback.handler.class": MSK_OAUTH,
            "sasl.client.callback.handler.class": MSK_OAUTH,
        },
    ],
)
def test_msk_iam_login_becomes_the_signers_token_function(given):
    client = translate({"security.protocol": "SASL_SSL", **given}, CONSUMER)
    assert client.librdkafka == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        PROVIDER: MSK_PROVIDER,
        "sasl.oauthbearer.config": "{}",
    }
    check_client_config({**client.librdkafka, "group.id": "g"}, "consumer", client.origin, "test")


def test_msk_options_reach_the_signer_and_the_java_librarys_retry_settings_are_named_as_ignored():
    client = translate(
        {
            "sasl.mechanism": "AWS_MSK_IAM",
            "sasl.oauthbearer.config": "region=eu-west-1",
            "sasl.jaas.config": (
                f'{MSK_MODULE} required awsRoleArn="arn:aws:iam::123456789012:role/msk" '
                'awsRoleSessionName="etl" awsStsRegion="eu-west-1" awsMaxRetries="7";'
            ),
        },
        CONSUMER,
    )
    assert json.loads(client.librdkafka["sasl.oauthbearer.config"]) == {
        "awsRoleArn": "arn:aws:iam::123456789012:role/msk",
        "awsRoleSessionName": "etl",
        "awsStsRegion": "eu-west-1",
        "region": "eu-west-1",
    }
    assert [name for name, _ in client.ignored] == ["sasl.jaas.config option awsMaxRetries"]


def test_a_named_token_function_gets_the_jaas_options_and_the_config_pairs():
    config = librdkafka_config(
        {
            PROVIDER: "tests.support.token_functions:fixed",
            "sasl.oauthbearer.config": "audience=kafka tenant=acme,scope=a,b",
            "sasl.jaas.config": f'{MODULE} required clientSecret="{SECRET}";',
            "sasl.login.callback.handler.class": "com.acme.LoginHandler",
        },
        prefix="kafka.",
    )
    assert config["sasl.mechanism"] == "OAUTHBEARER" and config[PROVIDER] == "tests.support.token_functions:fixed"
    assert provider_options(config["sasl.oauthbearer.config"]) == {
        "audience": "kafka",
        "tenant": "acme",
        "scope": "a,b",
        "clientSecret": SECRET,
    }


@pytest.mark.parametrize(
    "given,message",
    [
        ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{MODULE} required;"}, "needs a way to get tokens"),
        (
            {"sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": HANDLER},
            "set kafka.sasl.oauthbearer.token.endpoint.url",
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                "sasl.jaas.config": f'{MODULE} required clientSecret="{SECRET}";',
            },
            'give clientId="..." in kafka.sasl.jaas.config',
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.endpoint.url": "file:///var/run/secrets/token",
                "sasl.jaas.config": f"{MODULE} required;",
            },
            "names a token file (Java's FileJwtRetriever), which librdkafka cannot read",
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.login.callback.handler.class": "com.acme.VaultLoginHandler",
                "sasl.jaas.config": f'{MODULE} required clientSecret="{SECRET}";',
            },
            "com.acme.VaultLoginHandler, a Java class, which cannot run in librdkafka",
        ),
        (
            {
                "sasl.jaas.config": (
                    f'{MODULE} required unsecuredLoginStringClaim_sub="a" unsecuredLoginNumberClaim_n="1";'
                )
            },
            "not unsecuredLoginNumberClaim_n",
        ),
        ({"sasl.jaas.config": f'{MODULE} required unsecuredLoginListClaim_scope=",a";'}, "needs the principal"),
        (
            {"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f'{MODULE} required clientSecret="{SECRET}";'},
            f"set kafka.sasl.jaas.config to '{MSK_MODULE} required;'",
        ),
        (
            {"sasl.mechanism": "AWS_MSK_IAM", "sasl.client.callback.handler.class": "com.acme.Handler"},
            "does not belong to an AWS MSK IAM login",
        ),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f"{MSK_MODULE} required;"},
            "set kafka.sasl.mechanism to AWS_MSK_IAM",
        ),
        (
            {"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f'{MSK_MODULE} required awsMskRegionProvider="x.Y";'},
            "awsMskRegionProvider names a Java class",
        ),
        ({PROVIDER: "not a reference"}, "is not a function reference: write it as package.module:function"),
        (
            {PROVIDER: "tests.support.token_functions:fixed", "sasl.oauthbearer.method": "oidc"},
            "set kafka.sasl.oauthbearer.method or kafka.sasl.oauthbearer.token.provider, not both",
        ),
    ],
)
def test_what_cannot_log_in_is_refused_naming_the_setting_and_never_the_secret(given, message):
    with pytest.raises(JaasConfigError, match=re.escape(message)) as error:
        librdkafka_config(given)
    assert SECRET not in str(error.value)
    with pytest.raises(KafkaConfigError, match=re.escape(message)):
        translate(given, CONSUMER)


def test_login_classes_of_other_mechanisms_are_ignored_with_a_warning():
    client = translate(
        {
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="u" password="{SECRET}";',
            "sasl.login.callback.handler.class": "com.acme.Login",
        },
        CONSUMER,
    )
    assert client.librdkafka["sasl.password"] == SECRET
    assert [name for name, _ in client.ignored] == ["sasl.login.callback.handler.class"]


@pytest.mark.parametrize(
    "reference,message",
    [
        ("tests.support.no_such_module:token", "cannot import tests.support.no_such_module"),
        ("tests.support.token_functions:missing", "tests.support.token_functions has no missing"),
        ("tests.support.token_functions:NOT_CALLABLE", "is not a function"),
    ],
)
def test_a_bad_token_function_reference_fails_where_the_query_is_defined(reference, message):
    with pytest.raises(KafkaConfigError, match=re.escape(message)):
        check_client_config(
            {PROVIDER: reference, "sasl.mechanism": "OAUTHBEARER", "group.id": "g"}, "consumer", {}, "test"
        )


def test_the_msk_login_without_the_aws_extra_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)  # as if not installed
    with pytest.raises(Exception, match=re.escape("pip install 'pyspark-pylog[aws]'")):
        load_provider(MSK_PROVIDER)
    client = translate({"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f"{MSK_MODULE} required;"}, CONSUMER)
    with pytest.raises(KafkaConfigError, match=re.escape("pip install 'pyspark-pylog[aws]'")):
        check_client_config({**client.librdkafka, "group.id": "g"}, "consumer", client.origin, "pylog source")


def test_token_function_options_read_librdkafkas_pairs_and_json():
    assert provider_options("region=eu-west-1,audience=kafka") == {"region": "eu-west-1", "audience": "kafka"}
    assert provider_options("principal=admin scope=a,b extension_x=1") == {
        "principal": "admin",
        "scope": "a,b",
        "extension_x": "1",
    }
    assert provider_options('{"a": "b c"}') == {"a": "b c"}
    assert provider_options("") == {}


def test_librdkafkas_own_oauthbearer_settings_pass_as_they_are():
    given = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.metadata.authentication.type": "azure_imds",
        "sasl.oauthbearer.config": "query=api-version=2025-04-07&resource=api://kafka",
    }
    client = translate(given, CONSUMER)
    assert client.librdkafka == given
    check_client_config({**client.librdkafka, "group.id": "g"}, "consumer", client.origin, "test")
