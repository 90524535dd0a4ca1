"""Broker settings, named after Kafka's server.properties keys (snake case)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_spark.broker.durability import DEFAULT_FLUSH_TIMEOUT_MS, DEFAULT_RING_ENTRIES
from kafka_spark.broker.memory_pool import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from kafka_spark.broker.protocol.frames import MAX_FRAME_BYTES
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.common.kafka_uuid import random_cluster_id


@dataclass(frozen=True)
class BrokerConfig:
    """What one broker node needs to run.

    ``host`` is where the listener binds (loopback unless told otherwise); ``advertised_host`` is
    what Metadata tells clients to connect to (defaults to ``host``, or 127.0.0.1 when binding to
    all interfaces). ``port=0`` picks a free port; the bound port is advertised.
    """

    log_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    advertised_host: str | None = None
    node_id: int = 0
    cluster_id: str = field(default_factory=random_cluster_id)
    auto_create_topics_enable: bool = True
    num_partitions: int = 1  # partitions of auto-created topics, as Kafka's num.partitions
    log: LogConfig = field(default_factory=LogConfig)
    log_retention_check_interval_ms: int = 300_000
    # Kafka's socket.request.max.bytes: a request declaring more closes its connection.
    socket_request_max_bytes: int = MAX_FRAME_BYTES
    # Kafka's socket.send.buffer.bytes and socket.receive.buffer.bytes: SO_SNDBUF and SO_RCVBUF of
    # every client connection; -1 leaves one to the operating system, which tunes it as data
    # flows. Neither default is Kafka's 100 KiB, for what each costs a broker written in Python
    # (README, "Benchmarks"). The send buffer is how much of a Fetch answer one sendfile queues:
    # Linux's autotuned buffer (up to 4 MiB) queued a whole answer at once, 100 KiB had the broker
    # come back (a Python callback) for every slice of ~100 KiB, and at 512 KiB Kafka's Java
    # consumer waited least for its answers.
    # A receive buffer of 100 KiB made the broker's reads of produce requests smaller and more.
    socket_send_buffer_bytes: int = 524_288
    socket_receive_buffer_bytes: int = -1
    # Kafka's queued.max.request.bytes: what all connections' partly received and queued requests
    # may hold together before the broker stops reading sockets (memory_pool.py); -1 unbounded.
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    # log.flush.timeout.ms: an fsync not done after this long takes its partition offline
    # (durability.py); log.flush.io.uring.entries: the size of the fsync ring (uring.py).
    log_flush_timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS
    log_flush_io_uring_entries: int = DEFAULT_RING_ENTRIES
    # Kafka waits 3 s for more members before the first rebalance of an empty group; on one
    # machine members start within milliseconds of each other, so a short delay is enough.
    group_initial_rebalance_delay_ms: int = 100
    # Kafka's group.min/max.session.timeout.ms: a JoinGroup asking for a session outside them is
    # refused with INVALID_SESSION_TIMEOUT, so a consumer set to time out too fast fails at once
    # instead of joining and being expired between its heartbeats over and over.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    # Kafka's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms: the
    # session of a member of a consumer-protocol group (KIP-848), and how often it heartbeats.
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    # Kafka's group.consumer.migration.policy: whether a live group moves between the classic and
    # the consumer protocol (coordinator/migration.py): bidirectional (Kafka's default), upgrade
    # (classic to consumer only), downgrade (back only) or disabled.
    group_consumer_migration_policy: str = "bidirectional"
    # Kafka's max.incremental.fetch.session.cache.slots: the fetch sessions (KIP-227) kept at
    # once; a consumer that finds no slot gets full, sessionless fetches (apis/fetch_session.py).
    max_incremental_fetch_session_cache_slots: int = 1_000
    # Kafka's transactional.id.expiration.ms: an id unused this long with no open transaction is forgotten.
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    # Kafka's producer.id.expiration.ms and its check interval: an idempotent producer's state in
    # a partition is forgotten once its last batch is this old and no transaction of it is open.
    producer_id_expiration_ms: int = 24 * 3_600_000
    producer_id_expiration_check_interval_ms: int = 600_000
    # SASL users (name -> password): when given, the listener is SASL_PLAINTEXT and every
    # connection authenticates first, by one of ``sasl_mechanisms`` (sasl.py). Never logged,
    # never written to disk.
    sasl_users: Mapping[str, str] | None = field(default=None, repr=False)
    sasl_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # sasl.enabled.mechanisms
    # OAUTHBEARER among sasl_mechanisms makes the listener SASL too, with or without users: tokens
    # are checked by this validator (oauthbearer/validator.py; Kafka's
    # listener.name.<l>.oauthbearer.sasl.server.callback.handler.class), by default an unsecured
    # JWS validator as Kafka's. connections_max_reauth_ms is Kafka's connections.max.reauth.ms
    # (KIP-368): the longest a session lasts before the client must re-authenticate; 0: only a
    # token's expiry bounds it.
    sasl_oauthbearer_validator: Any = None
    connections_max_reauth_ms: int = 0
    # A cluster's brokers log in to each other with OAUTHBEARER: a callable returning the token
    # this broker presents (oauthbearer/login.py; run in a worker thread). None: an unsecured
    # token for User:broker when the validator takes those. Never logged.
    sasl_oauthbearer_token_provider: Any = field(default=None, repr=False)
    # TLS: with a certificate (PEM chain; the key in it or in ssl_keyfile) the listener is SSL, or
    # SASL_SSL with users. ssl_client_auth is Kafka's ssl.client.auth: none, requested or
    # required, client certificates chaining to ssl_cafile.
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_client_auth: str = "none"
    # Kafka's authorizer.class.name (StandardAuthorizer, or AclAuthorizer): ACLs decide what each
    # principal may do (authorizer.py); super_users (super.users) may do everything, and
    # allow_everyone_if_no_acl_found lets anyone use a resource that no ACL names.
    authorizer_class_name: str | None = None
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False

    def __post_init__(self) -> None:
        if self.socket_request_max_bytes < 8:
            raise ValueError(
                f"socket_request_max_bytes={self.socket_request_max_bytes}: a request takes at least 8 bytes"
            )
        for name in ("socket_send_buffer_bytes", "socket_receive_buffer_bytes"):
            if getattr(self, name) == 0 or getattr(self, name) < -1:
                raise ValueError(
                    f"{name}={getattr(self, name)}: give a positive size in bytes, or -1 for the operating system's"
                )
        if self.queued_max_request_bytes == 0 or self.queued_max_request_bytes < -1:
            raise ValueError(
                f"queued_max_request_bytes={self.queued_max_request_bytes}: give a positive size, or -1 for no bound"
            )
        if self.log_flush_timeout_ms <= 0:
            raise ValueError(
                f"log_flush_timeout_ms={self.log_flush_timeout_ms}: give a positive number of milliseconds"
            )
        if not 1 <= self.log_flush_io_uring_entries <= 32768:
            raise ValueError(
                f"log_flush_io_uring_entries={self.log_flush_io_uring_entries}: io_uring takes 1 to 32768 entries"
            )
        from kafka_spark.broker.authorizer import AUTHORIZER_CLASSES

        if self.authorizer_class_name and self.authorizer_class_name not in AUTHORIZER_CLASSES:
            raise ValueError(
                f"authorizer.class.name={self.authorizer_class_name!r}: pylog's authorizer is the ACL "
                f"authorizer; set it to {' or '.join(sorted(AUTHORIZER_CLASSES))}, or leave it out"
            )
        self._check_sasl()
        from kafka_spark.broker.coordinator.migration import MIGRATION_POLICIES

        policy = self.group_consumer_migration_policy.lower()
        if policy not in MIGRATION_POLICIES:
            raise ValueError(
                f"group.consumer.migration.policy={self.group_consumer_migration_policy!r}: use one of "
                f"{', '.join(MIGRATION_POLICIES)}"
            )
        object.__setattr__(self, "group_consumer_migration_policy", policy)
        if self.ssl_client_auth not in ("none", "requested", "required"):
            raise ValueError(f"ssl_client_auth={self.ssl_client_auth!r}: use none, requested or required")
        if self.ssl_client_auth != "none" and not self.ssl_cafile:
            raise ValueError("ssl_client_auth needs ssl_cafile: the CAs that client certificates must chain to")

    def _check_sasl(self) -> None:
        from kafka_spark.broker.oauthbearer.unsecured import UnsecuredJwsValidator
        from kafka_spark.broker.sasl import MECHANISMS, OAUTHBEARER

        unknown = [mechanism for mechanism in self.sasl_mechanisms if mechanism not in MECHANISMS]
        if unknown or not self.sasl_mechanisms:
            raise ValueError(
                f"sasl_mechanisms={','.join(self.sasl_mechanisms)}: pylog authenticates with {', '.join(MECHANISMS)}"
            )
        oauthbearer = OAUTHBEARER in self.sasl_mechanisms
        if self.sasl_oauthbearer_validator is not None and not oauthbearer:
            raise ValueError(
                "sasl_oauthbearer_validator is given but OAUTHBEARER is not in sasl_mechanisms; add it, e.g. "
                'sasl_mechanisms=("OAUTHBEARER",)'
            )
        if oauthbearer and self.sasl_oauthbearer_validator is None:
            # Kafka's default server callback handler for OAUTHBEARER
            object.__setattr__(self, "sasl_oauthbearer_validator", UnsecuredJwsValidator())
        if oauthbearer and "PLAIN" in self.sasl_mechanisms and not self.sasl_users:
            raise ValueError("sasl_mechanisms holds PLAIN but no sasl_users are given: give the users, or drop PLAIN")
        if self.sasl_oauthbearer_validator is not None and not callable(
            getattr(self.sasl_oauthbearer_validator, "validate", None)
        ):
            raise ValueError(
                f"sasl_oauthbearer_validator={type(self.sasl_oauthbearer_validator).__name__} has no validate(token, "
                "extensions) method (see kafka_spark.broker.oauthbearer.OAuthBearerValidator)"
            )
        if self.connections_max_reauth_ms < 0:
            raise ValueError(
                f"connections_max_reauth_ms={self.connections_max_reauth_ms}: give a positive number of "
                "milliseconds, or 0 for no bound but the credential's"
            )

    @property
    def sasl_enabled(self) -> bool:
        """The listener authenticates clients with SASL: users are given, or OAUTHBEARER is enabled."""
        return bool(self.sasl_users) or "OAUTHBEARER" in self.sasl_mechanisms

    @property
    def security_protocol(self) -> str:
        tls = bool(self.ssl_certfile)
        if self.sasl_enabled:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    @property
    def advertised(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
