"""Kafka's Java-only security settings, read for librdkafka and for the embedded broker.

Spark's Kafka connector and Kafka's own brokers take SASL credentials as a JAAS line::

    kafka.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required
                             username="alice" password="alice-secret";

librdkafka has no JAAS: it takes ``sasl.username`` / ``sasl.password`` (PLAIN, SCRAM),
``sasl.kerberos.keytab`` / ``sasl.kerberos.principal`` (GSSAPI) and its own OAUTHBEARER settings
(kafka_spark.common.token_login: OIDC, MSK IAM, token functions). :func:`librdkafka_config` turns
the Java settings a Spark job already has into those, so that moving a job to pylog stays a change
of format name; what has no librdkafka equivalent fails with what to set instead. Errors never
repeat a value: these settings hold passwords.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafka_spark.common.token_login import TokenLoginConfigError, token_login, wants_token_login
from kafka_spark.errors import PylogError

_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_KERBEROS = "com.sun.security.auth.module.Krb5LoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
# Kafka's JaasConfig (a StreamTokenizer) quotes values with " or ' (Confluent's docs use ').
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^\s;"\']+)')


class JaasConfigError(PylogError, ValueError):
    """A JAAS line that cannot be read or has no librdkafka equivalent (the message names the
    setting and the fix, never a value)."""


def parse_jaas(text: str, setting: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of one JAAS entry ``Module flag k="v" k2=v2;``.
    Databricks' shaded class names (``kafkashaded.org.apache...``) read as the plain ones."""
    body = text.strip()
    if body.endswith(";"):
        body = body[:-1]
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in _FLAGS:
        raise JaasConfigError(
            f"{setting} is not a JAAS entry of the form "
            "'<LoginModule class> required key=\"value\" ...;' (its value is not shown: it may hold a password)"
        )
    module = parts[0].removeprefix("kafkashaded.")
    rest = parts[2] if len(parts) == 3 else ""
    options: dict[str, str] = {}
    position = 0
    while position < len(rest):
        if rest[position:].strip() == "":
            break
        match = _OPTION.match(rest, position)
        if match is None:
            raise JaasConfigError(
                f"{setting}: cannot read the options of {module} after position {position} "
                '(write them as key="value"; the value is not shown)'
            )
        value = match.group(2)
        if value.startswith(('"', "'")):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[match.group(1)] = value
        position = match.end()
    return module, options


#: Java settings naming the classes of a SASL login; librdkafka has none of them.
LOGIN_CLASSES = (
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.oauthbearer.jwt.retriever.class",
)


def librdkafka_config(
    config: Mapping[str, str], prefix: str = "kafka.", ignored: list[tuple[str, str]] | None = None
) -> dict[str, str]:
    """``config`` (Kafka client settings, named without ``prefix``) with the Java-only ones
    replaced by librdkafka's: ``sasl.jaas.config`` by the credentials it holds, an OAUTHBEARER
    or AWS MSK IAM login (the JAAS line and the Java handler classes) by librdkafka's
    (kafka_spark.common.token_login), a PEM ``ssl.truststore.location`` by ``ssl.ca.location``,
    a PKCS#12 or PEM key store by librdkafka's key settings, inline PEM text
    (``ssl.truststore.certificates``, ``ssl.keystore.key``, ``ssl.keystore.certificate.chain``)
    by ``ssl.*.pem``, Java's empty ``ssl.endpoint.identification.algorithm`` by ``none``.
    Settings given but not used are appended to ``ignored`` as (name, why)."""
    out = dict(config)
    ignored = ignored if ignored is not None else []
    jaas = out.pop("sasl.jaas.config", None)
    classes = {name: out.pop(name) for name in LOGIN_CLASSES if name in out}
    parsed = parse_jaas(jaas, f"{prefix}sasl.jaas.config") if jaas is not None else None
    if wants_token_login(out, parsed[0] if parsed else None, classes):
        try:
            out = token_login(out, parsed, classes, prefix, ignored)
        except TokenLoginConfigError as error:
            raise JaasConfigError(str(error)) from None
    else:
        if jaas is not None:
            out.update(_jaas_credentials(jaas, out, prefix))
        for name in classes:
            ignored.append((name, "a Java class of the login; librdkafka logs in from sasl.* / sasl.jaas.config"))
    truststore = out.pop("ssl.truststore.location", None)
    truststore_type = out.pop("ssl.truststore.type", None)
    out.pop("ssl.truststore.password", None)  # a PEM file has none; a JKS one is refused below
    if truststore is not None:
        if (truststore_type or "").upper() != "PEM" and not truststore.lower().endswith((".pem", ".crt")):
            raise JaasConfigError(
                f"{prefix}ssl.truststore.location names a Java trust store, which librdkafka cannot read: export "
                f"its CA certificates to a PEM file (keytool -exportcert -rfc) and set {prefix}ssl.ca.location "
                "to it, or leave both unset to trust the system's CAs"
            )
        if "ssl.ca.location" in out:
            raise JaasConfigError(f"set {prefix}ssl.ca.location or {prefix}ssl.truststore.location, not both")
        out["ssl.ca.location"] = truststore
    _keystore(out, prefix)
    for java, pem in (
        ("ssl.truststore.certificates", "ssl.ca.pem"),
        ("ssl.keystore.key", "ssl.key.pem"),
        ("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
    ):
        if java in out:  # PEM text given inline
            out[pem] = out.pop(java)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    return out


def _keystore(out: dict[str, str], prefix: str) -> None:
    """Java's client key store: a PKCS#12 file is librdkafka's ``ssl.keystore.location`` too, a
    PEM file (key and certificate chain) its ``ssl.key.location`` + ``ssl.certificate.location``;
    a JKS store is refused with how to convert it."""
    store_type = (out.pop("ssl.keystore.type", None) or "").strip().upper()
    location = out.get("ssl.keystore.location")
    if location is None:
        return
    if store_type == "PEM" or (not store_type and location.lower().endswith(".pem")):
        out.pop("ssl.keystore.location")
        out.pop("ssl.keystore.password", None)  # a PEM key's password is ssl.key.password
        out["ssl.certificate.location"] = location
        out["ssl.key.location"] = location
    elif not (store_type == "PKCS12" or (not store_type and location.lower().endswith((".p12", ".pfx")))):
        raise JaasConfigError(
            f"{prefix}ssl.keystore.location names a {store_type or 'Java'} key store, which librdkafka cannot "
            f"read: convert it to PKCS#12 (keytool -importkeystore -deststoretype PKCS12) and set "
            f"{prefix}ssl.keystore.type=PKCS12, or to PEM files for {prefix}ssl.key.location and "
            f"{prefix}ssl.certificate.location"
        )


def _jaas_credentials(jaas: str, config: Mapping[str, str], prefix: str) -> dict[str, str]:
    module, options = parse_jaas(jaas, f"{prefix}sasl.jaas.config")
    mechanism = (config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").upper()
    if module in (_PLAIN, _SCRAM):
        if "username" not in options or "password" not in options:
            raise JaasConfigError(
                f'{prefix}sasl.jaas.config: {module.rsplit(".", 1)[1]} needs username="..." and password="..."'
            )
        if module == _SCRAM and not mechanism.startswith("SCRAM-"):
            raise JaasConfigError(
                f"{prefix}sasl.jaas.config uses ScramLoginModule: set {prefix}sasl.mechanism to "
                "SCRAM-SHA-256 or SCRAM-SHA-512"
            )
        if module == _PLAIN and mechanism not in ("", "PLAIN"):
            raise JaasConfigError(
                f"{prefix}sasl.jaas.config uses PlainLoginModule but {prefix}sasl.mechanism is "
                f"{mechanism}: set it to PLAIN"
            )
        for key in ("sasl.username", "sasl.password"):
            if key in config:
                raise JaasConfigError(f"set {prefix}sasl.jaas.config or {prefix}{key}, not both")
        out = {"sasl.username": options["username"], "sasl.password": options["password"]}
        if not mechanism:
            out["sasl.mechanism"] = "PLAIN"
        return out
    if module == _KERBEROS:
        out = {}
        if "keyTab" in options:
            out["sasl.kerberos.keytab"] = options["keyTab"]
        if "principal" in options:
            out["sasl.kerberos.principal"] = options["principal"]
        return out
    raise JaasConfigError(
        f"{prefix}sasl.jaas.config uses {module}, which pylog cannot translate for librdkafka; use "
        f"PlainLoginModule, ScramLoginModule, Krb5LoginModule, OAuthBearerLoginModule or MSK's IAMLoginModule, "
        f"or set {prefix}sasl.* directly"
    )
