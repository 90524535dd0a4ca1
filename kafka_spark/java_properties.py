"""The Java Kafka clients' properties (``kafka.*`` options) in librdkafka's terms: one table.

Spark's Kafka connector hands every ``kafka.*`` option to Kafka's Java clients, so jobs carry Java
consumer and producer properties (Kafka 4.x ``ConsumerConfig`` / ``ProducerConfig`` /
``CommonClientConfigs``). pylog's clients are librdkafka's, which refuses names it does not know.
:data:`PROPERTIES` gives each Java property, per client role, one :class:`Rule`:

``same``      librdkafka has it under the same name and meaning: passed as given;
``renamed``   librdkafka has it under another name (and unit): translated;
``pylog``     librdkafka has no equivalent, pylog applies the meaning itself (the value is in
              :attr:`ClientConfig.honoured` for the connector to use);
``ignored``   no meaning here (a JVM mechanism, or a client behaviour pylog does not have):
              dropped, and :func:`warn_ignored` names it once;
``rejected``  Spark's connector refuses it, and so does pylog, with the same advice.

A Java property of the other client (a producer setting on the source) is ignored with a warning,
as the Java client warns about a supplied property it does not use. Names that are not Java
properties are librdkafka's own (``kafka.fetch.wait.max.ms``) and pass through.
:func:`check_client_config` then creates the client once, without connecting, when the query is
defined, so a value librdkafka refuses fails there naming the ``kafka.*`` option, never in a task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafka_spark.common.jaas import JaasConfigError, librdkafka_config
from kafka_spark.common.token_login import PROVIDER, load_provider
from kafka_spark.errors import PylogError
from kafka_spark.option_names import close_match, warn_once

__all__ = [
    "CONSUMER",
    "PRODUCER",
    "PROPERTIES",
    "ClientConfig",
    "KafkaConfigError",
    "Rule",
    "check_client_config",
    "translate",
    "warn_ignored",
]

CONSUMER = "consumer"
PRODUCER = "producer"


class KafkaConfigError(PylogError, ValueError):
    """A ``kafka.*`` option pylog cannot pass on; the message names it and what to set instead."""


@dataclass(frozen=True)
class Rule:
    action: str  # same | renamed | pylog | ignored | rejected
    note: str = ""  # what pylog does with it (README table, warnings, errors)
    target: str | None = None  # librdkafka name (renamed)
    convert: Callable[[str], str] | None = None  # Java value -> librdkafka value (renamed)
    security: bool = False  # translated with the credentials (kafka_spark.common.jaas.librdkafka_config)


SAME = Rule("same")


def _renamed(target: str, convert: Callable[[str], str] | None = None, note: str = "") -> Rule:
    return Rule("renamed", note or f"librdkafka's `{target}`", target, convert)


def _ignored(note: str) -> Rule:
    return Rule("ignored", note)


def _os_default(value: str) -> str:  # Java's -1 ("the OS default") is librdkafka's 0
    return "0" if value.strip() == "-1" else value


def _kbytes(value: str) -> str:
    return str(max(1, math.ceil(int(value) / 1024)))


_JVM = _ignored("JVM metrics / classes; librdkafka has no equivalent")
_JAVA_LOGIN = _ignored("Java login framework; librdkafka logs in from `sasl.*` / `sasl.jaas.config`")
_JAVA_TLS = _ignored("Java TLS provider settings; librdkafka uses OpenSSL's")
_OAUTH_BROKER = _ignored("token validation settings of brokers; a client does not use them")
_OAUTH_CHECK = _ignored(
    "Java's client checks the claims of the tokens it gets; librdkafka reads their subject and expiry"
)
_SECURITY = Rule("renamed", "to librdkafka's credential and certificate settings (see below the table)", security=True)
_LOGIN_CLASS = Rule(
    "renamed",
    "OAUTHBEARER and AWS_MSK_IAM: chooses librdkafka's login (docs/managed-kafka.md); another Java class is "
    "refused; with other mechanisms, ignored (warning)",
    security=True,
)

_COMMON: dict[str, Rule] = {
    "bootstrap.servers": Rule("same", "without it, the local embedded broker"),
    **dict.fromkeys(
        (
            "client.id",
            "client.dns.lookup",
            "connections.max.idle.ms",
            "enable.metrics.push",
            "metadata.max.age.ms",
            "metadata.recovery.strategy",
            "metadata.recovery.rebootstrap.trigger.ms",
            "reconnect.backoff.ms",
            "reconnect.backoff.max.ms",
            "retry.backoff.ms",
            "retry.backoff.max.ms",
            "security.protocol",
            "socket.connection.setup.timeout.ms",
            "sasl.mechanism",
            "sasl.kerberos.service.name",
            "sasl.kerberos.min.time.before.relogin",
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.scope",
            "sasl.oauthbearer.sub.claim.name",
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.assertion.algorithm",
            "sasl.oauthbearer.assertion.claim.aud",
            "sasl.oauthbearer.assertion.claim.exp.seconds",
            "sasl.oauthbearer.assertion.claim.iss",
            "sasl.oauthbearer.assertion.claim.jti.include",
            "sasl.oauthbearer.assertion.claim.nbf.seconds",
            "sasl.oauthbearer.assertion.claim.sub",
            "sasl.oauthbearer.assertion.file",
            "sasl.oauthbearer.assertion.private.key.file",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "ssl.key.password",
        ),
        SAME,
    ),
    "ssl.cipher.suites": Rule("same", "OpenSSL cipher names (Java's IANA names are refused at start)"),
    "ssl.endpoint.identification.algorithm": Rule("same", "Java's empty value becomes `none`"),
    "sasl.kerberos.kinit.cmd": Rule(
        "same",
        "a whole command line, as librdkafka takes it; a bare kinit path (Java's meaning) is ignored with a warning",
    ),
    "sasl.oauthbearer.assertion.template.file": _renamed("sasl.oauthbearer.assertion.jwt.template.file"),
    "receive.buffer.bytes": _renamed("socket.receive.buffer.bytes", _os_default),
    "send.buffer.bytes": _renamed("socket.send.buffer.bytes", _os_default),
    "request.timeout.ms": _renamed(
        "socket.timeout.ms", note="librdkafka's `socket.timeout.ms` (the client-side request timeout; at most 300000)"
    ),
    **dict.fromkeys(
        (
            "sasl.jaas.config",
            "ssl.truststore.location",
            "ssl.truststore.type",
            "ssl.truststore.password",
            "ssl.truststore.certificates",
            "ssl.keystore.location",
            "ssl.keystore.type",
            "ssl.keystore.password",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
        ),
        _SECURITY,
    ),
    **dict.fromkeys(
        (
            "metric.reporters",
            "metrics.num.samples",
            "metrics.recording.level",
            "metrics.sample.window.ms",
            "security.providers",
        ),
        _JVM,
    ),
    "sasl.client.callback.handler.class": _LOGIN_CLASS,
    "sasl.login.callback.handler.class": _LOGIN_CLASS,
    "sasl.oauthbearer.jwt.retriever.class": _LOGIN_CLASS,
    "socket.connection.setup.timeout.max.ms": _ignored(
        "librdkafka has one setup timeout, `socket.connection.setup.timeout.ms`"
    ),
    **dict.fromkeys(
        (
            "sasl.kerberos.ticket.renew.jitter",
            "sasl.kerberos.ticket.renew.window.factor",
            "sasl.login.class",
            "sasl.login.connect.timeout.ms",
            "sasl.login.read.timeout.ms",
            "sasl.login.refresh.buffer.seconds",
            "sasl.login.refresh.min.period.seconds",
            "sasl.login.refresh.window.factor",
            "sasl.login.refresh.window.jitter",
            "sasl.login.retry.backoff.max.ms",
            "sasl.login.retry.backoff.ms",
        ),
        _JAVA_LOGIN,
    ),
    **dict.fromkeys(
        (
            "sasl.oauthbearer.expected.audience",
            "sasl.oauthbearer.expected.issuer",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
            "sasl.oauthbearer.jwks.endpoint.url",
            "sasl.oauthbearer.clock.skew.seconds",
        ),
        _OAUTH_BROKER,
    ),
    "sasl.oauthbearer.scope.claim.name": _OAUTH_CHECK,
    "sasl.oauthbearer.jwt.validator.class": _OAUTH_CHECK,
    "sasl.oauthbearer.header.urlencode": _ignored(
        "librdkafka sends the OIDC client id and secret as given, Java's default (false)"
    ),
    **dict.fromkeys(
        (
            "ssl.enabled.protocols",
            "ssl.protocol",
            "ssl.engine.factory.class",
            "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm",
            "ssl.provider",
            "ssl.secure.random.implementation",
        ),
        _JAVA_TLS,
    ),
}

_CONSUMER: dict[str, Rule] = {
    **dict.fromkeys(
        (
            "allow.auto.create.topics",
            "auto.commit.interval.ms",
            "check.crcs",
            "client.rack",
            "fetch.max.bytes",
            "fetch.min.bytes",
            "group.id",
            "group.instance.id",
            "group.protocol",
            "group.remote.assignor",
            "heartbeat.interval.ms",
            "isolation.level",
            "max.partition.fetch.bytes",
            "max.poll.interval.ms",
            "session.timeout.ms",
        ),
        SAME,
    ),
    "fetch.max.wait.ms": _renamed("fetch.wait.max.ms"),
    "default.api.timeout.ms": Rule(
        "pylog",
        "the timeout of the source's metadata, offset and group "
        "commit calls on the driver, and how long a query waits for a "
        "cluster that accepts no connection before it fails naming the "
        "address (default 30000)",
    ),
    "auto.offset.reset": Rule(
        "rejected",
        "Kafka option 'auto.offset.reset' is not supported. Instead set the "
        "source option 'startingOffsets' to 'earliest' or 'latest' to specify where to "
        "start. Structured Streaming manages which offsets are consumed internally, "
        "rather than relying on the kafkaConsumer. This will ensure that no data is "
        "missed when new topics/partitions are dynamically subscribed. Note that "
        "'startingOffsets' only applies when a new Streaming query is started, and that "
        "resuming will always pick up from where the query left off.",
    ),
    "key.deserializer": Rule(
        "rejected",
        "Kafka option 'key.deserializer' is not supported, as keys are always "
        "deserialized as byte arrays. Use DataFrame operations to explicitly deserialize "
        "the keys.",
    ),
    "value.deserializer": Rule(
        "rejected",
        "Kafka option 'value.deserializer' is not supported, as values are "
        "always deserialized as byte arrays. Use DataFrame operations to explicitly "
        "deserialize the values.",
    ),
    "enable.auto.commit": Rule(
        "rejected",
        "Kafka option 'enable.auto.commit' is not supported: the source tracks "
        "offsets in the query's checkpoint. To publish progress to a consumer group for "
        "lag monitoring, set commitOffsetsToGroup=true together with kafka.group.id.",
    ),
    "interceptor.classes": Rule("rejected", "Kafka option 'interceptor.classes' is not supported."),
    "exclude.internal.topics": _ignored("subscribePattern never matches internal topics, as in Spark"),
    "max.poll.records": _ignored("pylog reads whole offset ranges, not polls"),
    "partition.assignment.strategy": _ignored("the source assigns partitions itself (see assignmentStrategy)"),
    "share.acknowledgement.mode": _ignored("share groups are not used"),
    "internal.leave.group.on.close": _ignored("internal Java setting"),
    "internal.throw.on.fetch.stable.offset.unsupported": _ignored("internal Java setting"),
}

_PRODUCER: dict[str, Rule] = {
    **dict.fromkeys(
        (
            "acks",
            "compression.type",
            "delivery.timeout.ms",
            "linger.ms",
            "max.in.flight.requests.per.connection",
            "retries",
        ),
        SAME,
    ),
    "batch.size": _renamed(
        "batch.size", lambda v: "1" if v.strip() == "0" else v, note="same; Java's 0 (no batching) becomes 1"
    ),
    "buffer.memory": _renamed(
        "queue.buffering.max.kbytes", _kbytes, note="librdkafka's `queue.buffering.max.kbytes` (bytes / 1024)"
    ),
    "max.request.size": _renamed("message.max.bytes"),
    **{
        f"compression.{codec}.level": _renamed(
            "compression.level",
            note=f"librdkafka's `compression.level` when compression.type={codec} (no effect otherwise, as in Java)",
        )
        for codec in ("gzip", "lz4", "zstd")
    },
    "max.block.ms": Rule(
        "pylog", "how long a task waits for room in the producer's queue and for the transaction calls (default 60000)"
    ),
    "default.api.timeout.ms": Rule(
        "pylog",
        "how long a write waits, when it starts, for a cluster that accepts "
        "no connection or does not answer before it fails naming the "
        "address (default 30000), as the source does",
    ),
    "partitioner.class": Rule(
        "pylog",
        "Kafka's DefaultPartitioner (the default): librdkafka's "
        "`murmur2_random`; UniformStickyPartitioner: `random`; "
        "RoundRobinPartitioner: pylog deals rows to partitions in turn; "
        "another class is refused",
    ),
    "partitioner.ignore.keys": Rule("pylog", "true: librdkafka's `random` partitioner"),
    "transaction.timeout.ms": Rule("pylog", "the default of the sink's transactionTimeoutMs"),
    "enable.idempotence": Rule("pylog", "true (the default) always; false only with deliveryGuarantee=at-least-once"),
    "key.serializer": Rule(
        "rejected",
        "Kafka option 'key.serializer' is not supported as keys are serialized "
        "with ByteArraySerializer: the sink writes the key column's bytes as they are.",
    ),
    "value.serializer": Rule(
        "rejected",
        "Kafka option 'value.serializer' is not supported as values are "
        "serialized with ByteArraySerializer: the sink writes the value column's bytes as "
        "they are.",
    ),
    "transactional.id": Rule(
        "rejected",
        "Kafka option 'transactional.id' is not supported: exactly-once mode "
        "derives one per query and task; use the sink option transactionalIdPrefix.",
    ),
    "interceptor.classes": _ignored("Java classes cannot run in librdkafka"),
    "metadata.max.idle.ms": _ignored("librdkafka keeps metadata of the topics it produces to"),
    "partitioner.adaptive.partitioning.enable": _ignored("librdkafka's sticky partitioner is not adaptive"),
    "partitioner.availability.timeout.ms": _ignored("librdkafka's sticky partitioner is not adaptive"),
    "transaction.two.phase.commit.enable": _ignored("the sink commits each task's transaction itself"),
}


@dataclass(frozen=True)
class JavaProperty:
    name: str
    consumer: Rule | None  # None: not a consumer property
    producer: Rule | None


#: Every Java consumer and producer property (Kafka 4.1), by name.
PROPERTIES: dict[str, JavaProperty] = {
    name: JavaProperty(name, _COMMON.get(name, _CONSUMER.get(name)), _COMMON.get(name, _PRODUCER.get(name)))
    for name in sorted({*_COMMON, *_CONSUMER, *_PRODUCER})
}

#: librdkafka's names for its aliases: errors speak of the canonical name.
_ALIASES = {
    "linger.ms": "queue.buffering.max.ms",
    "retries": "message.send.max.retries",
    "acks": "request.required.acks",
    "delivery.timeout.ms": "message.timeout.ms",
    "compression.type": "compression.codec",
    "max.partition.fetch.bytes": "fetch.message.max.bytes",
    "sasl.mechanism": "sasl.mechanisms",
    "bootstrap.servers": "metadata.broker.list",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
}
_SECURITY_ORIGIN = {
    "sasl.username": "sasl.jaas.config",
    "sasl.password": "sasl.jaas.config",
    "sasl.kerberos.keytab": "sasl.jaas.config",
    "sasl.kerberos.principal": "sasl.jaas.config",
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.ca.pem": "ssl.truststore.certificates",
    "ssl.certificate.location": "ssl.keystore.location",
    "ssl.key.location": "ssl.keystore.location",
    "ssl.key.pem": "ssl.keystore.key",
    "ssl.certificate.pem": "ssl.keystore.certificate.chain",
    "sasl.oauthbearer.method": "sasl.login.callback.handler.class",
    "sasl.oauthbearer.client.id": "sasl.jaas.config",
    "sasl.oauthbearer.client.secret": "sasl.jaas.config",
    "sasl.oauthbearer.extensions": "sasl.jaas.config",
    "sasl.oauthbearer.config": "sasl.jaas.config",
    "sasl.oauthbearer.grant.type": "sasl.oauthbearer.jwt.retriever.class",
    "enable.sasl.oauthbearer.unsecure.jwt": "sasl.jaas.config",
    "https.ca.location": "sasl.jaas.config",
}
_JAVA_PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": "murmur2_random",
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": "random",
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": "round_robin",
}
ROUND_ROBIN = "round_robin"


@dataclass
class ClientConfig:
    """A ``kafka.*`` config for one client role, translated.

    ``librdkafka`` is what the clients get; ``origin`` maps each of its names (and librdkafka's
    canonical names of aliases) to the ``kafka.*`` option it came from; ``honoured`` holds the
    Java properties pylog applies itself; ``ignored`` the dropped ones with the reason.
    """

    librdkafka: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    honoured: dict[str, str] = field(default_factory=dict)
    ignored: list[tuple[str, str]] = field(default_factory=list)


def _rule(name: str, role: str) -> Rule | None:
    prop = PROPERTIES.get(name)
    if prop is None:
        return None
    rule = prop.consumer if role == CONSUMER else prop.producer
    if rule is None:
        other = PRODUCER if role == CONSUMER else CONSUMER
        return _ignored(f"a {other} property; the {'source' if role == CONSUMER else 'topic sink'} does not use it")
    return rule


def translate(config: Mapping[str, str], role: str, prefix: str = "kafka.") -> ClientConfig:
    """``config`` (Kafka client settings named without ``prefix``) for a ``role`` client.
    Raises :class:`KafkaConfigError` for a rejected property or an untranslatable value."""
    given = {str(k).lower(): str(v) for k, v in config.items()}
    out = ClientConfig()
    passed: dict[str, str] = {}
    for name, value in given.items():
        rule = _rule(name, role)
        if rule is None or rule.action == "same" or rule.security:
            if name == "sasl.kerberos.kinit.cmd" and " " not in value.strip():
                out.ignored.append((name, "Java's kinit path; librdkafka takes a whole command line here"))
                continue
            passed[name] = value
        elif rule.action == "rejected":
            raise KafkaConfigError(rule.note)
        elif rule.action == "ignored":
            out.ignored.append((name, rule.note))
        elif rule.action == "pylog":
            out.honoured[name] = value
        elif name.startswith("compression.") and name.endswith(".level"):
            codec = name.split(".")[1]
            assert rule.target is not None  # a renamed rule names its target
            if given.get("compression.type", "").strip().lower() == codec:
                passed[rule.target] = value
                out.origin[rule.target] = name
        else:  # renamed
            assert rule.target is not None
            try:
                passed[rule.target] = rule.convert(value) if rule.convert else value
            except ValueError:
                raise KafkaConfigError(f"{prefix}{name} must be a number, got {value!r}") from None
            out.origin[rule.target] = name
    _partitioner(out, passed, role, prefix)
    try:  # sasl.jaas.config, the login's Java classes, Java trust and key stores
        translated = librdkafka_config(passed, prefix, out.ignored)
    except JaasConfigError as error:
        raise KafkaConfigError(str(error)) from None
    for name in translated:
        if name not in passed:
            out.origin.setdefault(name, _SECURITY_ORIGIN.get(name, name))
    for name in passed:
        out.origin.setdefault(name, name)
        if name in _ALIASES:
            out.origin.setdefault(_ALIASES[name], name)
    out.librdkafka = translated
    return out


def _partitioner(out: ClientConfig, passed: dict[str, str], role: str, prefix: str) -> None:
    if role != PRODUCER:
        return
    java = out.honoured.get("partitioner.class", "").strip()
    if java:
        chosen = _JAVA_PARTITIONERS.get(java.removeprefix("class ").strip())
        if chosen is None:
            raise KafkaConfigError(
                f"{prefix}partitioner.class={java!r}: a Java partitioner cannot run in librdkafka. Give the rows "
                f"a 'partition' column computed with DataFrame functions, or set {prefix}partitioner to one of "
                "librdkafka's partitioners (murmur2_random, consistent_random, random, ...)"
            )
        if chosen == ROUND_ROBIN:
            out.honoured["partitioner.class"] = ROUND_ROBIN
        else:
            passed["partitioner"] = chosen
            out.origin["partitioner"] = "partitioner.class"
    if out.honoured.get("partitioner.ignore.keys", "false").strip().lower() == "true":
        passed["partitioner"] = "random"
        out.origin["partitioner"] = "partitioner.ignore.keys"


def warn_ignored(config: ClientConfig, what: str, prefix: str = "kafka.") -> None:
    """One warning per ignored property (kafka_spark.option_names.warn_once)."""
    for name, why in config.ignored:
        warn_once(f"{what}: ignoring {prefix}{name}: {why}")


#: librdkafka names users of pylog set (the README's), for "did you mean" besides Java's.
_LIBRDKAFKA_NAMES = (
    "fetch.wait.max.ms",
    "fetch.message.max.bytes",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "message.max.bytes",
    "message.timeout.ms",
    "socket.timeout.ms",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "partitioner",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "compression.level",
    "sticky.partitioning.linger.ms",
    "statistics.interval.ms",
    "debug",
    "enable.ssl.certificate.verification",
)


def check_client_config(
    config: Mapping[str, object], kind: str, origin: Mapping[str, str], what: str, prefix: str = "kafka."
) -> None:
    """Create a ``kind`` (consumer | producer | admin) client from ``config`` without connecting
    (no bootstrap servers, no log output) and destroy it; raise :class:`KafkaConfigError` naming
    the ``kafka.*`` option(s) behind whatever librdkafka refuses."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    probe = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "error_cb", "logger", PROVIDER)}
    probe["log_level"] = 0
    if PROVIDER in config:  # a token function: importable here, called only where clients connect
        try:
            load_provider(str(config[PROVIDER]), f"{prefix}{origin.get(PROVIDER, PROVIDER)}")
        except PylogError as error:  # unknown function, the AWS extra missing, ...
            raise KafkaConfigError(f"{what}: {error}") from None
    cls = {"consumer": Consumer, "producer": Producer, "admin": AdminClient}[kind]
    try:
        client = cls(probe)
    except KafkaException as error:
        raise KafkaConfigError(_explain(error.args[0].str(), origin, what, prefix)) from None
    except (TypeError, ValueError) as error:
        raise KafkaConfigError(f"{what}: a kafka.* option has a value of the wrong type: {error}") from None
    if kind == "consumer":
        client.close()
    del client


def _explain(message: str, origin: Mapping[str, str], what: str, prefix: str) -> str:
    import re

    named = [m for m in re.findall(r'[`"]([a-z][a-z0-9_.]+)[`"]', message)]
    options = list(dict.fromkeys(f"{prefix}{origin[n]}" for n in named if n in origin))
    if message.startswith("No such configuration property") and named:
        name = origin.get(named[0], named[0])
        hint = close_match(name, [*PROPERTIES, *_LIBRDKAFKA_NAMES])
        return (
            f"{what}: {prefix}{name} is neither a Kafka client property nor a librdkafka one."
            + (f" Did you mean {prefix}{hint}?" if hint else "")
            + " kafka.* options are the Java client's properties or librdkafka's."
        )
    subject = " / ".join(options) if options else "the kafka.* options"
    return f"{what}: {subject} refused by the Kafka client (librdkafka): {message.strip()}"
