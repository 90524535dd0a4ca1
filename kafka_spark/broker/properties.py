"""Broker settings from Kafka's server.properties keys: `pylog broker start FILE --override K=V`.

A Kafka user's config file works as it is: the keys this broker has are applied under Kafka's
names and meanings (``listeners``, ``log.dirs``, ``num.partitions``, ``log.retention.hours``, ...);
the keys about what a one-node broker does not have (replication, KRaft controllers, thread
pools) are accepted and reported as ignored; any other key is an error naming it, so a typo never
passes silently.

A SASL_PLAINTEXT listener authenticates clients with the ``sasl.enabled.mechanisms`` among PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER, its users given as Kafka gives PLAIN's:
``listener.name.sasl_plaintext.plain.sasl.jaas.config`` with ``user_NAME="password"`` options
(pylog derives the SCRAM credentials from them; Kafka keeps those in its metadata instead), its
token validation by the ``listener.name.<l>.oauthbearer.*`` and ``sasl.oauthbearer.*`` keys
(oauthbearer/settings.py), and ``connections.max.reauth.ms`` bounding its sessions (KIP-368). An
SSL or SASL_SSL listener takes its key and certificates as PEM files (``ssl.keystore.type=PEM``,
``ssl.keystore.location``, ``ssl.key.password``; ``ssl.truststore.*`` and ``ssl.client.auth`` for
client certificates).

Three keys are pylog's own: ``log.flush.on.ack.all`` (default true) fsyncs a partition before an
acks=all produce is acknowledged, since a single node has no replica to lean on. Set it to false
for Kafka's own policy, where the operating system decides when data reaches the disk
(``log.flush.interval.messages`` / ``log.flush.interval.ms`` still apply).
``log.flush.timeout.ms`` takes a partition whose fsync hangs offline after that long, and
``log.flush.io.uring.entries`` sizes the ring the fsyncs go through (durability.py).
``queued.max.request.bytes`` is Kafka's, with a bounded default here (memory_pool.py).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_spark.broker.apis.configs import BROKER_NAMES, FLUSH_ON_ACK_ALL
from kafka_spark.broker.oauthbearer.settings import is_oauthbearer_key
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import InvalidConfigError

# Broker-level name -> topic-level name, for the log defaults every topic inherits.
_LOG_DEFAULTS = {broker_name: topic_name for topic_name, broker_name in BROKER_NAMES.items()}
# Kafka's coarser spellings of two of them; the finer unit wins when both are given, as in Kafka.
_RETENTION_KEYS = (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000))
_ROLL_KEYS = (("log.roll.ms", 1), ("log.roll.hours", 3_600_000))

# Broker keys -> (EmbeddedBroker keyword, parser).
_BROKER_KEYS = {
    "num.partitions": ("num_partitions", int),
    "auto.create.topics.enable": ("auto_create_topics", "bool"),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", int),
    "socket.request.max.bytes": ("socket_request_max_bytes", int),
    "queued.max.request.bytes": ("queued_max_request_bytes", int),
    "socket.send.buffer.bytes": ("socket_send_buffer_bytes", int),
    "socket.receive.buffer.bytes": ("socket_receive_buffer_bytes", int),
    "log.flush.timeout.ms": ("log_flush_timeout_ms", int),
    "log.flush.io.uring.entries": ("log_flush_io_uring_entries", int),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", int),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", int),
    "group.consumer.session.timeout.ms": ("group_consumer_session_timeout_ms", int),
    "group.consumer.heartbeat.interval.ms": ("group_consumer_heartbeat_interval_ms", int),
    "group.consumer.migration.policy": ("group_consumer_migration_policy", str),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", int),
    "max.incremental.fetch.session.cache.slots": ("max_incremental_fetch_session_cache_slots", int),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", int),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", int),
    "producer.id.expiration.check.interval.ms": ("producer_id_expiration_check_interval_ms", int),
    "node.id": ("node_id", int),
    "broker.id": ("node_id", int),
    "authorizer.class.name": ("authorizer_class_name", str),
    "super.users": ("super_users", "principals"),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", "bool"),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", int),
}

# The broker keys with a range: (lowest, highest or None, what the value means).
_BOUNDS = {
    "socket.request.max.bytes": (8, None, "the largest request accepted, in bytes"),
    "queued.max.request.bytes": (-1, None, "bytes of requests held in memory, or -1 for no bound"),
    "socket.send.buffer.bytes": (-1, None, "a connection's socket send buffer in bytes, or -1 for the OS default"),
    "socket.receive.buffer.bytes": (
        -1,
        None,
        "a connection's socket receive buffer in bytes, or -1 for the OS default",
    ),
    "log.flush.timeout.ms": (1, None, "milliseconds an fsync may take before its partition goes offline"),
    "log.flush.io.uring.entries": (1, 32768, "entries of the fsync ring (io_uring takes 1 to 32768)"),
    "connections.max.reauth.ms": (0, None, "the longest SASL session before re-authentication, or 0 for no bound"),
}

_TLS_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.client.auth",
    }
)
_HANDLED_BELOW = frozenset(
    {"log.dirs", "log.dir", "listeners", "advertised.listeners", "sasl.enabled.mechanisms"}
    | {key for key, _ in _RETENTION_KEYS + _ROLL_KEYS}
    | _TLS_KEYS
)

# Kafka's per-listener SASL/PLAIN users (user_NAME="password" options of PlainLoginModule), and
# mechanisms.
_LISTENER_JAAS = re.compile(r"listener\.name\.([a-z0-9_]+)\.(plain\.sasl\.jaas\.config|sasl\.enabled\.mechanisms)")

# Kafka broker keys that mean nothing on one pylog node: replication and its quorum, KRaft
# controllers, and thread pools the event loop does not have.
IGNORED = frozenset(
    {
        "process.roles",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.listener.name",
        "listener.security.protocol.map",
        "num.network.threads",
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "log.cleaner.threads",
        "log.cleaner.enable",
        "queued.max.requests",
        "default.replication.factor",
        "min.insync.replicas",
        "offsets.topic.replication.factor",
        "offsets.topic.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "transaction.state.log.num.partitions",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "unclean.leader.election.enable",
        "auto.leader.rebalance.enable",
        "delete.topic.enable",
        "zookeeper.connect",
        "zookeeper.connection.timeout.ms",
        "group.coordinator.rebalance.protocols",
        "metadata.log.dir",
        "sasl.mechanism.inter.broker.protocol",
        "security.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "ssl.endpoint.identification.algorithm",
        "ssl.enabled.protocols",
        "ssl.protocol",
    }
)


@dataclass
class BrokerOptions:
    """What a properties map sets, as EmbeddedBroker's keyword arguments, plus the keys ignored."""

    settings: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java .properties file: ``key=value``, ``key: value`` or ``key value`` lines, ``#`` and
    ``!`` comments, a trailing backslash continuing a line."""
    properties: dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        key, value = _split(line)
        properties[key] = value
    if pending:
        key, value = _split(pending)
        properties[key] = value
    return properties


def _split(line: str) -> tuple[str, str]:
    for index, char in enumerate(line):
        if char in "=:" or char.isspace():
            key, rest = line[:index], line[index:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return key, rest
    return line, ""


def parse_override(item: str) -> tuple[str, str]:
    """``--override key=value`` (as kafka-server-start.sh takes it)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise InvalidConfigError(f"--override {item!r} is not KEY=VALUE, e.g. --override log.retention.hours=24")
    return key.strip(), value.strip()


def broker_options(properties: Mapping[str, str]) -> BrokerOptions:
    """EmbeddedBroker keyword arguments for Kafka broker ``properties``; InvalidConfigError names
    the first key that is unknown or has a bad value."""
    options = BrokerOptions()
    log_changes: dict[str, str] = {}
    flush_on_ack_all: bool | None = None
    unknown = []
    for key, value in properties.items():
        if key in _BROKER_KEYS:
            name, parse = _BROKER_KEYS[key]
            options.settings[name] = _parse(key, value, parse)
            if key in _BOUNDS:
                _check_bounds(key, options.settings[name])
        elif key in _LOG_DEFAULTS:
            log_changes[_LOG_DEFAULTS[key]] = value
        elif key in _HANDLED_BELOW or _LISTENER_JAAS.fullmatch(key) or is_oauthbearer_key(key):
            continue
        elif key == FLUSH_ON_ACK_ALL:
            flush_on_ack_all = _parse_bool(key, value)
        elif key in IGNORED:
            options.ignored.append(key)
        else:
            unknown.append(key)
    if unknown:
        hints = []
        for key in sorted(unknown):
            close = difflib.get_close_matches(key, known_keys() | IGNORED, n=1)
            hints.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise InvalidConfigError(
            f"unknown broker setting(s) {', '.join(hints)}; pylog applies {', '.join(sorted(known_keys()))}, "
            "and accepts Kafka's replication, controller and thread settings without effect"
        )
    for keys, topic_name in ((_RETENTION_KEYS, "retention.ms"), (_ROLL_KEYS, "segment.ms")):
        for key, unit_ms in keys:
            if key in properties:
                number = _parse_int(key, properties[key])
                log_changes[topic_name] = str(number if number < 0 else number * unit_ms)
                break
    log_dirs = properties.get("log.dirs", properties.get("log.dir"))
    if log_dirs is not None:
        dirs = [part.strip() for part in log_dirs.split(",") if part.strip()]
        if len(dirs) != 1:
            raise InvalidConfigError(f"log.dirs={log_dirs!r}: pylog keeps its data in one directory; give exactly one")
        options.settings["log_dir"] = dirs[0]
    _apply_listeners(properties, options)
    if log_changes or flush_on_ack_all is not None:
        try:
            log_config = LogConfig.from_topic_configs(log_changes)
        except InvalidConfigError as error:  # name the broker key the user wrote
            raise InvalidConfigError(_broker_named(str(error))) from None
        if flush_on_ack_all is not None:
            log_config = dataclasses.replace(log_config, flush_on_ack_all=flush_on_ack_all)
        options.settings["log_config"] = log_config
    return options


def known_keys() -> set[str]:
    return set(_BROKER_KEYS) | set(_LOG_DEFAULTS) | _HANDLED_BELOW | {FLUSH_ON_ACK_ALL}


def _broker_named(message: str) -> str:
    """A LogConfig error under the broker-level names: ``retention.ms=`` -> ``log.retention.ms=``."""
    message = message.replace("topic config ", "")
    return re.sub(r"(?<![\w.])([a-z][a-z.]*[a-z])(?=[=:])", lambda m: BROKER_NAMES.get(m.group(1), m.group(1)), message)


def _apply_listeners(properties: Mapping[str, str], options: BrokerOptions) -> None:
    controllers = {name.strip() for name in properties.get("controller.listener.names", "").split(",") if name.strip()}
    protocols = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    for entry in properties.get("listener.security.protocol.map", "").split(","):
        name, sep, mapped = entry.partition(":")
        if sep:
            protocols[name.strip()] = mapped.strip()
    for key in ("listeners", "advertised.listeners"):
        if key not in properties:
            continue
        endpoints = []
        for entry in properties[key].split(","):
            if not entry.strip():
                continue
            name, sep, address = entry.strip().partition("://")
            if not sep:
                raise InvalidConfigError(f"{key}: {entry.strip()!r} is not NAME://HOST:PORT")
            if name in controllers:
                continue
            protocol = protocols.get(name)
            if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise InvalidConfigError(
                    f"{key}: listener {name} has no security protocol; map it in listener.security.protocol.map "
                    "to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                )
            if key == "listeners" and protocol.startswith("SASL_"):
                options.settings.update(_sasl_settings(properties, name))
            if key == "listeners" and protocol.endswith("SSL"):
                options.settings.update(_tls_settings(properties, name))
            host, sep, port_text = address.rpartition(":")
            if not sep or not port_text.isdigit():
                raise InvalidConfigError(f"{key}: {entry.strip()!r} has no port; write {name}://HOST:PORT")
            endpoints.append((host.strip("[]"), int(port_text)))
        if len(endpoints) != 1:
            raise InvalidConfigError(
                f"{key}={properties[key]!r}: pylog serves exactly one listener (besides controller listeners)"
            )
        host, port = endpoints[0]
        if key == "listeners":
            # Kafka's meaning: an empty host binds every interface.
            options.settings["host"] = host or "0.0.0.0"
            options.settings["port"] = port
        else:
            listen_port = options.settings.get("port")
            if listen_port not in (None, 0, port):
                raise InvalidConfigError(
                    f"advertised.listeners port {port} differs from the listener's port {listen_port}; "
                    "pylog advertises the port it listens on (forwarding one port to another is not supported)"
                )
            if host:
                options.settings["advertised_host"] = host


def _tls_settings(properties: Mapping[str, str], listener: str) -> dict[str, Any]:
    """The TLS settings of an SSL or SASL_SSL listener: PEM key stores, as Kafka's
    ``ssl.keystore.type=PEM`` reads them (a JKS or PKCS12 store must be converted first)."""
    settings: dict[str, Any] = {}
    for store in ("keystore", "truststore"):
        kind = properties.get(f"ssl.{store}.type", "JKS").strip().upper()
        if f"ssl.{store}.location" in properties and kind != "PEM":
            raise InvalidConfigError(
                f"ssl.{store}.type={kind}: pylog reads PEM files only; convert the store (openssl pkcs12 -in "
                f"store.p12 -nodes -out store.pem, after keytool -importkeystore for JKS) and set "
                f"ssl.{store}.type=PEM"
            )
    if "ssl.keystore.location" not in properties:
        raise InvalidConfigError(
            f"listener {listener} uses TLS but ssl.keystore.location is not set; give the broker's key and "
            "certificate chain as one PEM file, with ssl.keystore.type=PEM"
        )
    settings["ssl_certfile"] = properties["ssl.keystore.location"].strip()
    if "ssl.key.password" in properties:
        settings["ssl_key_password"] = properties["ssl.key.password"]
    if "ssl.truststore.location" in properties:
        settings["ssl_cafile"] = properties["ssl.truststore.location"].strip()
    client_auth = properties.get("ssl.client.auth", "none").strip().lower()
    if client_auth not in ("none", "requested", "required"):
        raise InvalidConfigError(f"ssl.client.auth={client_auth!r} is invalid: use none, requested or required")
    if client_auth != "none" and "ssl_cafile" not in settings:
        raise InvalidConfigError("ssl.client.auth needs ssl.truststore.location (PEM): the CAs of client certificates")
    settings["ssl_client_auth"] = client_auth
    return settings


def _sasl_settings(properties: Mapping[str, str], listener: str) -> dict[str, Any]:
    """A SASL listener's mechanisms, its PLAIN users (for PLAIN and SCRAM) and its OAUTHBEARER
    validator."""
    from kafka_spark.broker.oauthbearer.settings import (
        OAuthBearerConfigError,
        listener_configs,
        validator_from_configs,
    )
    from kafka_spark.broker.sasl import MECHANISMS, OAUTHBEARER

    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    enabled = properties.get(key, properties.get("sasl.enabled.mechanisms", "GSSAPI"))
    mechanisms = tuple(m.strip().upper() for m in enabled.split(",") if m.strip())
    if not mechanisms or set(mechanisms) - set(MECHANISMS):
        raise InvalidConfigError(
            f"sasl.enabled.mechanisms={','.join(mechanisms)}: pylog authenticates with {', '.join(MECHANISMS)}; "
            "set sasl.enabled.mechanisms to those you want, e.g. PLAIN,SCRAM-SHA-512 or OAUTHBEARER"
        )
    settings: dict[str, Any] = {"sasl_mechanisms": mechanisms}
    if set(mechanisms) - {OAUTHBEARER}:
        settings["sasl_users"] = _sasl_users(properties, listener)
    if OAUTHBEARER in mechanisms:
        prefix = f"listener.name.{listener.lower()}.oauthbearer."
        try:
            configs = listener_configs(properties, listener)
            settings["sasl_oauthbearer_validator"] = validator_from_configs(
                configs, f"{prefix}sasl.server.callback.handler.class"
            )
        except OAuthBearerConfigError as error:
            raise InvalidConfigError(str(error)) from None
        if "connections.max.reauth.ms" in configs:  # Kafka's per-mechanism override of the broker's
            settings["connections_max_reauth_ms"] = _parse(
                f"{prefix}connections.max.reauth.ms", configs["connections.max.reauth.ms"], int
            )
    return settings


def _sasl_users(properties: Mapping[str, str], listener: str) -> dict[str, str]:
    """The users of a SASL_PLAINTEXT listener, from its PlainLoginModule's user_NAME options."""
    from kafka_spark.common.jaas import JaasConfigError, parse_jaas

    key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    if key not in properties:
        raise InvalidConfigError(
            f"listener {listener} is SASL_PLAINTEXT but {key} is not set; give it the users (for every "
            f"mechanism: pylog derives SCRAM credentials from them), e.g. {key}="
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
        )
    try:
        module, options = parse_jaas(properties[key], key)
    except JaasConfigError as error:
        raise InvalidConfigError(str(error)) from None
    users = {name[len("user_") :]: password for name, password in options.items() if name.startswith("user_")}
    if module != "org.apache.kafka.common.security.plain.PlainLoginModule" or not users:
        raise InvalidConfigError(f'{key} must be PlainLoginModule with at least one user_NAME="password" option')
    return users


def _parse(key: str, value: str, parse: Any) -> Any:
    if parse == "bool":
        return _parse_bool(key, value)
    if parse == "principals":  # Kafka's super.users: User:alice;User:bob
        principals = tuple(part.strip() for part in value.split(";") if part.strip())
        bad = [p for p in principals if not p.partition(":")[2] or not p.partition(":")[0]]
        if bad:
            raise InvalidConfigError(f"{key}={value!r}: {bad[0]!r} is not TYPE:NAME; write e.g. User:admin;User:ops")
        return principals
    if parse is str:
        return value.strip()
    return _parse_int(key, value)


def _parse_int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{key}={value!r} is invalid: expected a whole number") from None


# Sizes where -1 means "none" (no bound, the OS default) and 0 means nothing.
_NOT_ZERO = frozenset({"queued.max.request.bytes", "socket.send.buffer.bytes", "socket.receive.buffer.bytes"})


def _check_bounds(key: str, value: int) -> None:
    lowest, highest, meaning = _BOUNDS[key]
    if value < lowest or (highest is not None and value > highest) or (key in _NOT_ZERO and value == 0):
        allowed = f"{lowest} to {highest}" if highest is not None else f"at least {lowest}"
        raise InvalidConfigError(
            f"{key}={value} is invalid: {meaning}; use {allowed}" + (" (not 0)" if key in _NOT_ZERO else "")
        )


def _parse_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidConfigError(f"{key}={value!r} is invalid: use true or false")
    return lowered == "true"
