"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topics (internal ones included): Apache Kafka 4.3's topic configs (storage/config.py), each with
the value Kafka would show and where it comes from: the topic's own override
(DYNAMIC_TOPIC_CONFIG), the broker's default when it differs from Kafka's (STATIC_BROKER_CONFIG)
or Kafka's default (DEFAULT_CONFIG); ``min.insync.replicas`` is the cluster's, a cluster-level
config (DYNAMIC_DEFAULT_BROKER_CONFIG), as Kafka 4.1+ writes it (KIP-966). With
``include_synonyms`` the chain behind each value, under Kafka's broker-level names
(``cleanup.policy`` <- ``log.cleanup.policy``) where Kafka lists them. A change is checked as Kafka
4.3 checks it (INVALID_CONFIG, 40, with Kafka's message), stored as Kafka writes it (``+5`` as
``5``) and persisted with the topic's metadata; the logs apply it from their next operation.
IncrementalAlterConfigs APPENDs to and SUBTRACTs from list configs (``cleanup.policy``, the
throttled-replica lists) item by item, starting from the effective value.

The broker (resource name "" or this node's id): its settings, read-only, ``listeners`` and
``advertised.listeners`` among them (with the port bound); they are changed by restarting the
broker with others, not at run time (dynamic broker configs are not supported). With an
authorizer: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (29) or on the cluster for the broker (31).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.storage.config import (
    REPLICATION_CONFIGS,
    TOPIC_CONFIGS,
    LogConfig,
    normalize_topic_configs,
)
from kafka_spark.broker.storage.config import (
    config_type as topic_config_type,
)
from kafka_spark.broker.storage.config_def import ConfigType
from kafka_spark.broker.storage.errors import StorageError

TOPIC, BROKER = 2, 4
_DYNAMIC_TOPIC_CONFIG, _DYNAMIC_DEFAULT_BROKER_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 3, 4, 5
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {_SET: "SET", _DELETE: "DELETE", _APPEND: "APPEND", _SUBTRACT: "SUBTRACT"}

# Kafka's broker-level names of the topic-level settings (ServerTopicConfigSynonyms).
BROKER_NAMES = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "preallocate": "log.preallocate",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
# The topic configs whose broker-level default Kafka does not list among the synonyms (no broker
# setting, or one given in coarser units: log.retention.hours, log.roll.hours).
_NO_DEFAULT_SYNONYM = frozenset(
    {
        "flush.ms",
        "retention.ms",
        "segment.ms",
        "segment.jitter.ms",
        "internal.segment.bytes",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
)
# pylog's own broker setting: fsync before acknowledging acks=all (a single node has no replicas).
FLUSH_ON_ACK_ALL = "log.flush.on.ack.all"


# -- DescribeConfigs ------------------------------------------------------------------------------


def handle_describe(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for resource in body.resources:
        result = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
            "configs": (),
        }
        try:
            _authorize(broker, request, access.DESCRIBE_CONFIGS, resource)
            if resource.resource_type == TOPIC:
                entries = _topic_entries(broker, resource.resource_name, synonyms)
            elif resource.resource_type == BROKER:
                entries = _broker_entries(broker, resource.resource_name, synonyms)
            else:
                raise _RequestError(
                    ErrorCode.invalid_request,
                    f"resource type {resource.resource_type} is not supported "
                    f"here; describe topics ({TOPIC}) or the broker ({BROKER})",
                )
        except _RequestError as error:
            result.update(error_code=error.code, error_message=error.message)
        else:
            keys = resource.configuration_keys
            result["configs"] = [entry for entry in entries if keys is None or entry["name"] in keys]
        results.append(result)
    return {"throttle_time": 0, "results": results}


def _topic_entries(broker: BrokerContext, name: str, synonyms: bool) -> list[dict[str, Any]]:
    return topic_config_entries(broker, _topic(broker, name).configs, synonyms)


def topic_config_entries(
    broker: BrokerContext, overrides: Mapping[str, str], synonyms: bool = False
) -> list[dict[str, Any]]:
    """Every topic-level setting of a topic with ``overrides``, as DescribeConfigs and
    CreateTopics v5+ list them: Kafka 4.3's topic configs (``internal.segment.bytes`` only when
    set), with the value Kafka would show."""
    defaults = broker.config.log
    effective = LogConfig.from_stored_configs(overrides, defaults).to_topic_configs()
    broker_values = defaults.to_topic_configs()
    for name in REPLICATION_CONFIGS:
        broker_values[name] = _cluster_default(broker, name)
        effective[name] = overrides.get(name, broker_values[name])
    entries = []
    for key, value in sorted(effective.items()):
        kafka_default = TOPIC_CONFIGS[key].default
        broker_name = BROKER_NAMES.get(key, key)
        chain = []
        if key in overrides:
            chain.append((key, value, _DYNAMIC_TOPIC_CONFIG))
        if key == "min.insync.replicas":  # the cluster's, a cluster-level config as Kafka 4.1+ (KIP-966) writes it
            chain.append((key, broker_values[key], _DYNAMIC_DEFAULT_BROKER_CONFIG))
        elif broker_values.get(key, kafka_default) != kafka_default:
            chain.append((broker_name, broker_values[key], _STATIC_BROKER_CONFIG))
        source = chain[0][2] if chain else _DEFAULT_CONFIG
        if key not in _NO_DEFAULT_SYNONYM:
            chain.append((broker_name, kafka_default, _DEFAULT_CONFIG))
        entries.append(_entry(key, value, source, read_only=False, synonyms=chain if synonyms else ()))
    return entries


def _broker_entries(broker: BrokerContext, name: str, synonyms: bool) -> list[dict[str, Any]]:
    config = broker.config
    if name not in ("", str(config.node_id)):
        raise _RequestError(
            ErrorCode.invalid_request,
            f"unexpected broker id {name!r}: this broker is {config.node_id} (or use an empty name)",
        )
    protocol = config.security_protocol  # the listener is named after its protocol, as Kafka's default
    values: dict[str, Any] = {
        "listeners": f"{protocol}://{config.host}:{broker.port}",
        "advertised.listeners": f"{protocol}://{broker.advertised_host}:{broker.port}",
        "broker.id": config.node_id,
        "node.id": config.node_id,
        "log.dirs": config.log_dir,
        "num.partitions": config.num_partitions,
        "auto.create.topics.enable": config.auto_create_topics_enable,
        "log.retention.check.interval.ms": config.log_retention_check_interval_ms,
        "socket.request.max.bytes": config.socket_request_max_bytes,
        "socket.send.buffer.bytes": config.socket_send_buffer_bytes,
        "socket.receive.buffer.bytes": config.socket_receive_buffer_bytes,
        "group.initial.rebalance.delay.ms": config.group_initial_rebalance_delay_ms,
        "group.min.session.timeout.ms": config.group_min_session_timeout_ms,
        "group.max.session.timeout.ms": config.group_max_session_timeout_ms,
        "transactional.id.expiration.ms": config.transactional_id_expiration_ms,
        "producer.id.expiration.ms": config.producer_id_expiration_ms,
        "producer.id.expiration.check.interval.ms": config.producer_id_expiration_check_interval_ms,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "min.insync.replicas": _cluster_default(broker, "min.insync.replicas"),
        FLUSH_ON_ACK_ALL: config.log.flush_on_ack_all,
    }
    for key, value in config.log.to_topic_configs().items():
        values[BROKER_NAMES.get(key, key)] = value
    entries = []
    for key, value in sorted(values.items()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        chain = [(key, text, _STATIC_BROKER_CONFIG)]
        if key == "min.insync.replicas":  # the cluster's, a cluster-level config as Kafka 4.1+ writes it
            chain = [(key, text, _DYNAMIC_DEFAULT_BROKER_CONFIG)]
        entries.append(_entry(key, text, chain[0][2], read_only=True, synonyms=chain if synonyms else ()))
    return entries


def _cluster_default(broker: BrokerContext, name: str) -> str:
    """A replication setting's cluster-wide value (the controller's), or Kafka's default."""
    image = broker.replicas.image
    defaults = image.defaults if image is not None else {}
    return defaults.get(name, TOPIC_CONFIGS[name].default)


def _entry(
    name: str, value: str, source: int, *, read_only: bool, synonyms: Iterable[tuple[str, str, int]]
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "config_type": config_type(name, value),
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in synonyms],
    }


# DescribeConfigs v3+ config types (Kafka's ConfigDef.Type as the protocol numbers it).
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
_TYPES = {
    "segment.bytes": _INT,
    "max.message.bytes": _INT,
    "index.interval.bytes": _INT,
    "cleanup.policy": _LIST,
    "min.cleanable.dirty.ratio": _DOUBLE,
    "message.timestamp.type": _STRING,
    "compression.type": _STRING,
    "compression.gzip.level": _INT,
    "compression.lz4.level": _INT,
    "compression.zstd.level": _INT,
    "num.partitions": _INT,
    "node.id": _INT,
    "broker.id": _INT,
    "log.dirs": _STRING,
    "listeners": _LIST,
    "advertised.listeners": _LIST,
    "socket.request.max.bytes": _INT,
    "socket.send.buffer.bytes": _INT,
    "socket.receive.buffer.bytes": _INT,
    "offsets.topic.replication.factor": _INT,
    "transaction.state.log.replication.factor": _INT,
    "min.insync.replicas": _INT,
    "group.initial.rebalance.delay.ms": _INT,
    "transactional.id.expiration.ms": _INT,
    "producer.id.expiration.ms": _INT,
    "group.min.session.timeout.ms": _INT,
    "group.max.session.timeout.ms": _INT,
}


def config_type(name: str, value: str) -> int:
    """The type DescribeConfigs v3+ reports for ``name``: from Kafka's definitions where they
    differ from the obvious; booleans as BOOLEAN; other numbers as LONG; the rest STRING."""
    topic_type = topic_config_type(name)
    if topic_type is not None:
        return int(topic_type)
    known = _TYPES.get(name) or _TYPES.get(BROKER_NAMES.get(name, ""))
    if known is None:
        for topic_name, broker_name in BROKER_NAMES.items():
            if broker_name == name:
                known = _TYPES.get(topic_name)
    if known is not None:
        return known
    if value in ("true", "false"):
        return _BOOLEAN
    return _LONG if value.lstrip("-").isdigit() else _STRING


# -- AlterConfigs and IncrementalAlterConfigs -------------------------------------------------------


def handle_alter(broker: BrokerContext, request: Any) -> dict[str, Any]:
    """AlterConfigs: the configs given become the topic's whole set of overrides."""

    def overrides(resource: Any, current: dict[str, str]) -> tuple[dict[str, str], set[str]]:
        wanted = {config.name: config.value for config in resource.configs if config.value is not None}
        return wanted, set(wanted)

    return _alter(broker, request, overrides)


def handle_incremental_alter(broker: BrokerContext, request: Any) -> dict[str, Any]:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on the current overrides. APPEND
    and SUBTRACT apply to list configs only, item by item, starting from the effective value."""

    def overrides(resource: Any, current: dict[str, str]) -> tuple[dict[str, str], set[str]]:
        names = [config.name for config in resource.configs]
        if len(names) != len(set(names)):
            raise _RequestError(ErrorCode.invalid_request, "a config key appears more than once in one resource")
        changed = dict(current)
        for config in resource.configs:
            operation = config.config_operation
            if operation == _SET:
                if config.value is None:
                    raise _RequestError(ErrorCode.invalid_config, f"SET of {config.name} needs a value")
                changed[config.name] = config.value
            elif operation == _DELETE:
                changed.pop(config.name, None)
            elif operation in (_APPEND, _SUBTRACT):
                if topic_config_type(config.name) is not ConfigType.LIST:
                    raise _RequestError(
                        ErrorCode.invalid_config,
                        f"Can't {_OPERATIONS[operation]} to key {config.name} because its type is not LIST.",
                    )
                items = _effective_list(broker, config.name, current)
                given = (config.value or "").split(",")
                if operation == _APPEND:
                    items += [item for item in given if item not in items]
                else:
                    items = [item for item in items if item not in given]
                changed[config.name] = ",".join(items)
            else:
                raise _RequestError(
                    ErrorCode.invalid_request, f"unknown config operation {operation} for {config.name}"
                )
        return changed, {name for name in names if name in changed}

    return _alter(broker, request, overrides)


def _alter(broker: BrokerContext, request: Any, overrides: Any) -> dict[str, Any]:
    body = request.body
    seen: dict[tuple[int, str], int] = {}
    for resource in body.resources:
        key = (resource.resource_type, resource.resource_name)
        seen[key] = seen.get(key, 0) + 1
    responses = []
    for resource in body.resources:
        response = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            _authorize(broker, request, access.ALTER_CONFIGS, resource)
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise _RequestError(
                    ErrorCode.invalid_request, f"resource {resource.resource_name!r} appears more than once"
                )
            if resource.resource_type == BROKER:
                wanted, _ = overrides(resource, {})  # a broker has no dynamic settings here
                if not wanted:  # deleting settings that are not set: nothing to do, as on Kafka
                    responses.append(response)  # (kafka-reassign-partitions --verify clears its throttles so)
                    continue
                raise _RequestError(
                    ErrorCode.invalid_request,
                    "broker configs cannot change while the broker runs; restart it with the new settings",
                )
            if resource.resource_type != TOPIC:
                raise _RequestError(
                    ErrorCode.invalid_request,
                    f"resource type {resource.resource_type} is not supported here; alter topic ({TOPIC}) configs",
                )
            info = _topic(broker, resource.resource_name)
            wanted, changed = overrides(resource, dict(info.configs))
            wanted = _checked(broker, wanted, changed)
            if not body.validate_only:  # every replica's broker takes them from the controller's next image
                broker.replicas.alter_topic_configs(resource.resource_name, wanted)
        except _RequestError as error:
            response.update(error_code=error.code, error_message=error.message)
        except StorageError as error:
            response.update(error_code=error.error_code, error_message=str(error))
        responses.append(response)
    return {"throttle_time": 0, "responses": responses}


def _checked(broker: BrokerContext, wanted: dict[str, str], changed: set[str]) -> dict[str, str]:
    """``wanted`` with the ``changed`` configs checked as Kafka 4.3 checks them and written as Kafka
    stores them, and the whole checked for consistency (InvalidConfigError, 40, if Kafka would
    refuse it). Overrides kept from before are not checked again (an older pylog stored them)."""
    fresh = normalize_topic_configs({name: wanted[name] for name in changed})
    kept = LogConfig.from_stored_configs(
        {name: value for name, value in wanted.items() if name not in changed}, broker.config.log
    )
    LogConfig.from_topic_configs(fresh, kept)
    return {**wanted, **fresh}


def _authorize(broker: BrokerContext, request: Any, operation: Any, resource: Any) -> None:
    """With an authorizer: the operation on the topic (29) or the cluster, for the broker (31)."""
    if resource.resource_type == TOPIC and not access.allowed(
        broker, request, operation, access.TOPIC, resource.resource_name
    ):
        raise _RequestError(
            ErrorCode.topic_authorization_failed,
            f"not authorized to {operation.name} on topic {resource.resource_name}",
        )
    if resource.resource_type == BROKER and not access.allowed_on_cluster(broker, request, operation):
        raise _RequestError(
            ErrorCode.cluster_authorization_failed, f"not authorized to {operation.name} on the cluster"
        )


def _effective_list(broker: BrokerContext, name: str, current: dict[str, str]) -> list[str]:
    value = LogConfig.from_stored_configs(current, broker.config.log).to_topic_configs()[name]
    return value.split(",") if value else []


def _topic(broker: BrokerContext, name: str) -> Any:
    """The topic's info, from the controller's metadata image (this broker may host no replica of
    it); internal topics included, as Kafka describes and alters their configs too."""
    info = broker.replicas.topics().get(name)
    if info is None:
        raise _RequestError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    return info


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
