"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topics: every topic-level setting this broker has (storage/config.py), with where its value comes
from: the topic's own override (DYNAMIC_TOPIC_CONFIG), the broker's default when it differs from
Kafka's (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG); with ``include_synonyms``
the chain behind it, under Kafka's broker-level names (``retention.ms`` <- ``log.retention.ms``).
Changes are persisted with the topic's metadata and apply to its logs from their next operation.

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
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import StorageError

TOPIC, BROKER = 2, 4
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = frozenset({"cleanup.policy"})  # the list-typed topic configs (APPEND / SUBTRACT)

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
}
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
    CreateTopics v5+ list them."""
    defaults = broker.config.log
    effective = LogConfig.from_topic_configs(overrides, defaults).to_topic_configs()
    broker_values = defaults.to_topic_configs()
    kafka_defaults = LogConfig().to_topic_configs()
    entries = []
    for key, value in sorted(effective.items()):
        chain = []
        if key in overrides:
            chain.append((key, value, _DYNAMIC_TOPIC_CONFIG))
        if broker_values[key] != kafka_defaults[key]:
            chain.append((BROKER_NAMES.get(key, key), broker_values[key], _STATIC_BROKER_CONFIG))
        chain.append((BROKER_NAMES.get(key, key), kafka_defaults[key], _DEFAULT_CONFIG))
        entries.append(_entry(key, value, chain[0][2], read_only=False, synonyms=chain if synonyms else ()))
    image = broker.replicas.image
    entries.extend(_replication_entries(image.defaults if image is not None else {}, overrides, synonyms))
    entries.sort(key=lambda entry: entry["name"])
    return entries


#: Topic settings that act on the partitions' leaders (the controller's image holds them), with
#: Kafka's defaults.
_REPLICATION_DEFAULTS = {"min.insync.replicas": "1", "unclean.leader.election.enable": "false"}


def _replication_entries(
    cluster_defaults: Mapping[str, str], overrides: Mapping[str, str], synonyms: bool
) -> list[dict[str, Any]]:
    entries = []
    for key, kafka_default in _REPLICATION_DEFAULTS.items():
        chain = []
        if key in overrides:
            chain.append((key, overrides[key], _DYNAMIC_TOPIC_CONFIG))
        cluster_value = cluster_defaults.get(key, kafka_default)
        if cluster_value != kafka_default:
            chain.append((key, cluster_value, _STATIC_BROKER_CONFIG))
        chain.append((key, kafka_default, _DEFAULT_CONFIG))
        entries.append(_entry(key, chain[0][1], chain[0][2], read_only=False, synonyms=chain if synonyms else ()))
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
        "min.insync.replicas": 1,
        FLUSH_ON_ACK_ALL: config.log.flush_on_ack_all,
    }
    for key, value in config.log.to_topic_configs().items():
        values[BROKER_NAMES.get(key, key)] = value
    entries = []
    for key, value in sorted(values.items()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        entries.append(
            _entry(
                key,
                text,
                _STATIC_BROKER_CONFIG,
                read_only=True,
                synonyms=[(key, text, _STATIC_BROKER_CONFIG)] if synonyms else (),
            )
        )
    return entries


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

    def overrides(resource: Any, current: dict[str, str]) -> dict[str, str]:
        return {config.name: config.value for config in resource.configs if config.value is not None}

    return _alter(broker, request, overrides)


def handle_incremental_alter(broker: BrokerContext, request: Any) -> dict[str, Any]:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on the current overrides."""

    def overrides(resource: Any, current: dict[str, str]) -> dict[str, str]:
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
                if config.name not in _LIST_CONFIGS:
                    raise _RequestError(
                        ErrorCode.invalid_config,
                        f"{'APPEND' if operation == _APPEND else 'SUBTRACT'} "
                        f"applies to list configs ({', '.join(sorted(_LIST_CONFIGS))}), "
                        f"not {config.name}",
                    )
                items = _effective_list(broker, config.name, current)
                given = [item.strip() for item in (config.value or "").split(",") if item.strip()]
                if operation == _APPEND:
                    items += [item for item in given if item not in items]
                else:
                    items = [item for item in items if item not in given]
                changed[config.name] = ",".join(items)
            else:
                raise _RequestError(
                    ErrorCode.invalid_request, f"unknown config operation {operation} for {config.name}"
                )
        return changed

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
            wanted = overrides(resource, dict(info.configs))
            LogConfig.from_topic_configs(wanted, broker.config.log)  # InvalidConfigError (40) if wrong
            if not body.validate_only:  # every replica's broker takes them from the controller's next image
                broker.replicas.alter_topic_configs(resource.resource_name, wanted)
        except _RequestError as error:
            response.update(error_code=error.code, error_message=error.message)
        except StorageError as error:
            response.update(error_code=error.error_code, error_message=str(error))
        responses.append(response)
    return {"throttle_time": 0, "responses": responses}


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
    value = LogConfig.from_topic_configs(current, broker.config.log).to_topic_configs()[name]
    return [item for item in value.split(",") if item]


def _topic(broker: BrokerContext, name: str) -> Any:
    """The topic's info, from the controller's metadata image (this broker may host no replica of it)."""
    info = None if is_internal_topic(name) else broker.replicas.topics().get(name)
    if info is None:
        raise _RequestError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    return info


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
