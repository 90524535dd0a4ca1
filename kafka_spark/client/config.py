"""The confluent-kafka configs of the pylog source, built from its options on the driver.

:func:`consumer_config` is what every consumer of a query gets (the driver's and, frozen into
each input partition as a :data:`ConfigKey`, the executors'), :func:`admin_config` the driver's
AdminClient; :func:`check_client_configs` builds both once without connecting where the query is
defined, so that a setting librdkafka refuses fails there, naming the option. Which cluster a
query talks to is decided by kafka_spark.source (kafka_spark.client.bootstrap), never here: the
executors' read path imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_spark.options import PylogOptionError, SourceOptions

__all__ = [
    "ConfigKey",
    "admin_config",
    "check_client_configs",
    "consumer_config",
    "freeze",
    "isolation_level",
]


#: A client config frozen into a hashable, picklable value: sorted (key, value) pairs.
ConfigKey = tuple[tuple[str, str], ...]


# librdkafka properties that only consumers understand; an AdminClient given them logs a
# warning per property, so they are left out of admin configs.
_CONSUMER_ONLY = {
    "group.id",
    "group.instance.id",
    "isolation.level",
    "enable.partition.eof",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "fetch.wait.max.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "check.crcs",
    "partition.assignment.strategy",
    "group.protocol",
    "group.remote.assignor",
    "client.rack",
}


def freeze(config: Mapping[str, Any]) -> ConfigKey:
    """A config dict as a hashable, picklable key."""
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


def consumer_config(options: SourceOptions, bootstrap_servers: str, group_id: str) -> ConfigKey:
    """The config of a consumer that reads exactly what it is told (driver or executor).

    As Spark's executors: no auto commit, no offset reset (``auto.offset.reset=error``: an
    out-of-range fetch is reported to the reader, which decides about data loss); the user's
    ``kafka.group.id`` wins over the generated ``group_id``. ``isolation.level`` defaults to
    ``read_uncommitted`` like the Java client Spark uses (librdkafka's own default is
    ``read_committed``); set ``kafka.isolation.level=read_committed`` to skip aborted records.
    ``enable.partition.eof`` lets a read end at the log end without waiting for a timeout.
    """
    config: dict[str, str] = {"group.id": group_id, "isolation.level": "read_uncommitted"}
    config.update(options.kafka_config)
    config.update(
        {
            "bootstrap.servers": bootstrap_servers,
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "error",
            "enable.partition.eof": "true",
        }
    )
    return freeze(config)


def admin_config(options: SourceOptions, bootstrap_servers: str) -> dict[str, str]:
    """The config of the driver's AdminClient: the user's connection and security settings."""
    config = {k: v for k, v in options.kafka_config.items() if k not in _CONSUMER_ONLY}
    config["bootstrap.servers"] = bootstrap_servers
    return config


def check_client_configs(options: SourceOptions) -> None:
    """Create the source's consumer and admin client from the ``kafka.*`` options once, without
    connecting, so that a setting librdkafka refuses fails where the query is defined, naming the
    option, and never in a task (kafka_spark.java_properties)."""
    from kafka_spark.java_properties import KafkaConfigError, check_client_config

    origin = dict(options.kafka_origin)
    try:
        check_client_config(
            dict(consumer_config(options, "", "pylog-config-check")), "consumer", origin, "pylog source"
        )
        check_client_config(admin_config(options, ""), "admin", origin, "pylog source")
    except KafkaConfigError as error:
        raise PylogOptionError(str(error)) from None


def isolation_level(options: SourceOptions) -> Any:
    """``kafka.isolation.level`` as confluent-kafka's enum (default read_uncommitted, as Java)."""
    from confluent_kafka import IsolationLevel

    level = options.kafka_config.get("isolation.level", "read_uncommitted").strip().lower()
    if level == "read_committed":
        return IsolationLevel.READ_COMMITTED
    if level == "read_uncommitted":
        return IsolationLevel.READ_UNCOMMITTED
    raise PylogOptionError(f"kafka.isolation.level must be 'read_committed' or 'read_uncommitted', got {level!r}")
