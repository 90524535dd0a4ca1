"""`pylog`: the embedded broker and Kafka tools with the habits of Kafka's own scripts.

    pylog broker start [server.properties] [--override K=V] [--log-dir D] [--host H] [--port P]
                                                               foreground; prints bootstrap.servers=H:P
    pylog broker status | stop                                 the local (registered) broker
    pylog cluster start --brokers N [--log-dir D] | status     a replicated embedded cluster (cluster.py)
    pylog topics create NAME --partitions N [--config k=v ...] [--if-not-exists] | list
    pylog topics describe | alter | delete NAME [--if-exists]
    pylog produce TOPIC [-K SEP] [-H NAME=VALUE ...]            one record per stdin line
    pylog consume TOPIC [--group G] [--from-beginning] [-e] [-c N] [-f FORMAT | -J]
    pylog groups list | describe GROUP | delete GROUP          consumer groups, offsets and lag
    pylog groups reset-offsets | delete-offsets GROUP --topic T[:P,..]

Every client command takes ``--bootstrap-server`` and so works against any Kafka cluster; without
it, the local broker registered by ``pylog broker start`` (or started on demand) is used.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_spark.cli import acls as cli_acls
from kafka_spark.cli import cluster as cli_cluster
from kafka_spark.cli import console as cli_console
from kafka_spark.cli import users as cli_users
from kafka_spark.client.librdkafka_log import routed
from kafka_spark.errors import PylogError


class CliError(PylogError):
    """A user-facing failure: printed as one line, exit status 1."""


# --- broker ---------------------------------------------------------------------------------


def _broker_start(args: argparse.Namespace) -> int:
    from kafka_spark.broker import EmbeddedBroker
    from kafka_spark.broker.allocator import keep_freed_memory
    from kafka_spark.broker.discovery import BrokerAlreadyRunning, default_data_dir, find_running

    settings = _broker_settings(args)
    running = find_running()
    if running is not None:  # before binding, so the message is about the broker, not a port
        raise CliError(str(BrokerAlreadyRunning(running)))
    keep_freed_memory()  # this process is the broker's alone

    def chosen(flag: Any, key: str, default: Any) -> Any:  # a command-line option wins over the config
        configured = settings.pop(key, default)
        return configured if flag is None else flag

    log_dir = Path(chosen(args.log_dir, "log_dir", None) or default_data_dir())
    host = chosen(args.host, "host", "127.0.0.1")
    if host in ("", "0.0.0.0", "::"):
        print(
            f"pylog: listening on all interfaces ({host or '0.0.0.0'}): any host that reaches this one can "
            "read and write its topics",
            file=sys.stderr,
            flush=True,
        )
    broker = EmbeddedBroker(
        log_dir=log_dir,
        host=host,
        port=chosen(args.port, "port", 9092),
        num_partitions=chosen(args.partitions, "num_partitions", 1),
        advertised_host=chosen(args.advertised_host, "advertised_host", None),
        register=True,
        **settings,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        broker.start()
    except BrokerAlreadyRunning as error:  # one started between the check above and now
        raise CliError(str(error)) from None
    print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
    print(f"log.dirs={log_dir}", file=sys.stderr, flush=True)
    config = broker.config
    if config.security_protocol != "PLAINTEXT":
        mechanisms = f" sasl.enabled.mechanisms={','.join(config.sasl_mechanisms)}" if config.sasl_users else ""
        print(f"security.protocol={config.security_protocol}{mechanisms}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        group_commit = broker.broker.group_commit
        broker.close()
        print(group_commit.stats, file=sys.stderr, flush=True)  # e.g. for scripts/soak_acks_all.py
        print("broker stopped", file=sys.stderr, flush=True)
    return 0


def _broker_settings(args: argparse.Namespace) -> dict[str, Any]:
    """EmbeddedBroker settings from a server.properties file and ``--override``s (which win)."""
    from kafka_spark.broker.properties import broker_options, parse_override, read_properties
    from kafka_spark.broker.storage.errors import InvalidConfigError

    try:
        properties = read_properties(args.config) if args.config else {}
    except OSError as error:
        raise CliError(f"cannot read broker config {args.config}: {error.strerror}") from None
    try:
        properties.update(parse_override(item) for item in args.override or [])
        options = broker_options(properties)
    except InvalidConfigError as error:
        raise CliError(str(error)) from None
    if options.ignored:
        print(
            f"pylog: ignoring {', '.join(options.ignored)} (replication, controller and thread settings mean "
            "nothing on a one-node pylog broker)",
            file=sys.stderr,
            flush=True,
        )
    return options.settings


def _broker_status(args: argparse.Namespace) -> int:
    from kafka_spark.broker.discovery import find_running, registry_path

    info = find_running()
    if info is None:
        print(f"no local broker running (registry: {registry_path()})")
        return 1
    print(f"running pid={info.pid} bootstrap.servers={info.bootstrap_servers} log.dirs={info.log_dir}")
    return 0


def _broker_stop(args: argparse.Namespace) -> int:
    from kafka_spark.broker.discovery import stop_running

    info = stop_running()
    if info is None:
        print("no local broker running")
        return 0
    print(f"stopped pid={info.pid} ({info.bootstrap_servers})")
    return 0


# --- clients --------------------------------------------------------------------------------


def _bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap_server:
        return args.bootstrap_server
    from kafka_spark.broker.discovery import find_running

    info = find_running()
    if info is None:
        raise CliError(
            "no --bootstrap-server given and no local broker running; "
            "start one with `pylog broker start` or pass --bootstrap-server HOST:PORT"
        )
    return info.bootstrap_servers


def _client_config(args: argparse.Namespace, **settings: Any) -> dict[str, Any]:
    """librdkafka settings of a client command: the bootstrap servers, the ``--command-config``
    file (Kafka client properties, Java's SASL/TLS names translated), then ``settings``."""
    config: dict[str, Any] = {}
    path = getattr(args, "command_config", None)
    if path:
        from kafka_spark.broker.properties import read_properties
        from kafka_spark.common.jaas import JaasConfigError, librdkafka_config

        try:
            config.update(librdkafka_config(read_properties(path), prefix=""))
        except OSError as error:
            raise CliError(f"cannot read --command-config {path}: {error.strerror}") from None
        except JaasConfigError as error:
            raise CliError(f"--command-config {path}: {error}") from None
    config["bootstrap.servers"] = _bootstrap(args)  # --bootstrap-server wins over the file
    _check_reachable(args, config["bootstrap.servers"])
    # What the tools print is what scripts read: librdkafka's informational lines (such as
    # "Purging N unserved events" when a client is destroyed) stay out of it; its warnings and
    # errors go through Python logging (rate-limited, to stderr), as Kafka's tools log WARN and up.
    config["log_level"] = 4
    config.update(settings)
    return routed(config)


#: How long a client command waits for a cluster that refuses connections (one starting up) or
#: does not answer a Kafka request.
REACH_TIMEOUT_S = 5.0


def _check_reachable(args: argparse.Namespace, bootstrap: str) -> None:
    """Fail at once, in one line, when nothing listens at the cluster's address or what listens
    does not answer: librdkafka would wait out each request's timeout and then say only
    "transport failure" or "timed out"."""
    from kafka_spark.client.reachability import ClusterUnreachable, wait_reachable

    if getattr(args, "reached", None) == bootstrap:
        return
    try:
        wait_reachable(bootstrap, REACH_TIMEOUT_S, require_answer=True)
    except ClusterUnreachable as error:
        raise CliError(
            f"{error}; check that the broker runs (`pylog broker status` for the local one) "
            "and that --bootstrap-server names it"
        ) from None
    args.reached = bootstrap


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(_client_config(args))


def _wait(futures: dict[Any, Any], what: str, tolerate: str | None = None) -> bool:
    """Wait for admin futures; a failure is a CliError, except the error named ``tolerate``
    (e.g. TOPIC_ALREADY_EXISTS for --if-not-exists): then False is returned."""
    from confluent_kafka import KafkaException

    for name, future in futures.items():
        try:
            future.result(timeout=30)
        except KafkaException as error:
            if tolerate is not None and error.args[0].name() == tolerate:
                return False
            raise CliError(f"{what} {name} failed: {error.args[0].str()}") from None
    return True


def _topic_exists(args: argparse.Namespace) -> bool:
    # All topics, not list_topics(topic=NAME): asking for one topic lets the broker auto-create it.
    topic = _admin(args).list_topics(timeout=30).topics.get(args.name)
    return topic is not None and topic.error is None


def _topics_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = dict(_key_value(item, "--config") for item in args.config or [])
    topic = NewTopic(
        args.name, num_partitions=args.partitions, replication_factor=args.replication_factor, config=configs
    )
    admin = _admin(args)  # must outlive its futures: a destroyed client fails them
    if _wait(
        admin.create_topics([topic], operation_timeout=30),
        "create topic",
        tolerate="TOPIC_ALREADY_EXISTS" if args.if_not_exists else None,
    ):
        print(f"Created topic {args.name}.")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    metadata = _admin(args).list_topics(timeout=30)
    for name in sorted(metadata.topics):
        print(name)
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    # All topics, not list_topics(topic=NAME): asking for one topic lets the broker auto-create it.
    metadata = _admin(args).list_topics(timeout=30)
    topic = metadata.topics.get(args.name)
    if topic is None or topic.error is not None:
        if args.if_exists:
            return 0
        raise CliError(f"topic {args.name!r} does not exist (list topics with `pylog topics list`)")
    configs = _topic_overrides(args, args.name)
    consumer = Consumer(_client_config(args, **{"group.id": "pylog-cli-describe", "enable.auto.commit": False}))
    try:
        print(f"Topic: {args.name}\tPartitionCount: {len(topic.partitions)}\tConfigs: {configs}")
        for index in sorted(topic.partitions):
            partition = topic.partitions[index]
            low, high = consumer.get_watermark_offsets(TopicPartition(args.name, index), timeout=30)
            print(
                f"\tTopic: {args.name}\tPartition: {index}\tLeader: {partition.leader}\t"
                f"Replicas: {','.join(map(str, partition.replicas))}\tIsr: {','.join(map(str, partition.isrs))}\t"
                f"LogStartOffset: {low}\tLogEndOffset: {high}"
            )
    finally:
        consumer.close()
    return 0


def _topic_overrides(args: argparse.Namespace, name: str) -> str:
    """The topic's own settings as kafka-topics --describe lists them (``k=v,k=v``). A cluster
    that refuses DescribeConfigs (an ACL, say) still gets its partitions described."""
    import concurrent.futures

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ConfigSource

    resource = ConfigResource("topic", name)
    admin = _admin(args)
    try:
        entries = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
    except KafkaException as error:
        return f"(not available: {error.args[0].str()})"
    except concurrent.futures.TimeoutError:
        return "(not available: no answer to DescribeConfigs within 10 s)"
    return ",".join(
        f"{key}={entry.value}"
        for key, entry in sorted(entries.items())
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )


def _topics_alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

    if args.partitions is None and not args.config and not args.delete_config:
        raise CliError("nothing to alter: give --partitions N, --config NAME=VALUE or --delete-config NAME")
    if args.if_exists and not _topic_exists(args):
        return 0
    admin = _admin(args)
    if args.partitions is not None:
        _wait(
            admin.create_partitions([NewPartitions(args.name, args.partitions)], operation_timeout=30),
            "add partitions to topic",
        )
        print(f"Topic {args.name} has {args.partitions} partitions now.")
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (_key_value(item, "--config") for item in args.config or [])
    ]
    entries += [
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in args.delete_config or []
    ]
    if entries:
        resource = ConfigResource("topic", args.name, incremental_configs=entries)
        _wait(admin.incremental_alter_configs([resource]), "alter configs of topic")
        print(f"Altered the configs of topic {args.name}.")
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    admin = _admin(args)
    if _wait(
        admin.delete_topics([args.name], operation_timeout=30),
        "delete topic",
        tolerate="UNKNOWN_TOPIC_OR_PART" if args.if_exists else None,
    ):
        print(f"Deleted topic {args.name}.")
    return 0


def _sink_vacuum(args: argparse.Namespace) -> int:
    from kafka_spark.files.table import vacuum
    from kafka_spark.files.writers import FileSinkError

    try:
        deleted = vacuum(args.path, older_than_seconds=args.older_than_seconds)
    except FileSinkError as error:
        raise CliError(str(error)) from None
    for path in deleted:
        print(f"deleted {path}")
    print(f"Vacuumed {args.path}: {len(deleted)} uncommitted file(s) deleted.", file=sys.stderr)
    return 0


def _progress(args: argparse.Namespace, what: str, **kwargs: Any) -> Any:
    """A progress bar with rates on stderr, shown when stderr is a terminal (or --progress)."""
    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return _NoProgress()  # and tqdm is not imported: a piped command starts faster
    from tqdm import tqdm

    return tqdm(desc=what, file=sys.stderr, mininterval=0.5, **kwargs)


class _NoProgress:
    """The progress bar of a command whose progress is not shown."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _key_value(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise CliError(f"{option} takes NAME=VALUE, got {item!r}")
    return key, value


# --- consumer groups ------------------------------------------------------------------------


def _groups_list(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = _admin(args)  # must outlive its futures: a destroyed client answers them empty
    try:
        listed = admin.list_consumer_groups(request_timeout=30).result(timeout=30)
    except KafkaException as error:
        raise CliError(f"listing consumer groups failed: {error.args[0].str()}") from None
    for group in sorted(listed.valid, key=lambda g: g.group_id):
        print(group.group_id)
    return 0


def _group_and_offsets(admin: Any, group: str) -> tuple[Any, dict[tuple[str, int], int]]:
    """The group's description and its committed offsets, by (topic, partition)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    try:
        description = admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)[
            group
        ].result(timeout=30)
    except KafkaException as error:
        raise CliError(f"reading consumer group {group!r} failed: {error.args[0].str()}") from None
    return description, {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions or [] if tp.offset >= 0}


def _groups_describe(args: argparse.Namespace) -> int:
    """Like ``kafka-consumer-groups.sh --describe --group G``: one row per partition that is
    assigned or has a committed offset; "-" where there is no member or no commit."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    group = args.group
    description, committed = _group_and_offsets(_admin(args), group)
    state = getattr(description.state, "name", str(description.state)).upper()
    if state == "DEAD" or (not description.members and not committed):
        raise CliError(f"consumer group {group!r} does not exist (list groups with `pylog groups list`)")
    owners: dict[tuple[str, int], Any] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = member
    partitions = sorted(set(committed) | set(owners))
    consumer = Consumer(
        {
            **_client_config(args),
            "group.id": "pylog-cli-groups",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        ends = {tp: consumer.get_watermark_offsets(KafkaTopicPartition(*tp), timeout=30)[1] for tp in partitions}
    except KafkaException as error:
        raise CliError(f"reading log end offsets failed: {error.args[0].str()}") from None
    finally:
        consumer.close()
    if not description.members:
        print(f"\nConsumer group '{group}' has no active members.")
    rows = []
    for tp in partitions:
        current, member = committed.get(tp), owners.get(tp)
        rows.append(
            (
                group,
                tp[0],
                str(tp[1]),
                "-" if current is None else str(current),
                str(ends[tp]),
                "-" if current is None else str(max(ends[tp] - current, 0)),
                member.member_id if member else "-",
                (member.host or "-") if member else "-",
                member.client_id if member else "-",
            )
        )
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    minimum = (15, 15, 10, 15, 15, 15, 15, 15, 0)
    widths = [max([minimum[i], len(header[i])] + [len(row[i]) for row in rows]) for i in range(len(header))]
    print()
    for row in [header, *rows]:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _groups_reset_offsets(args: argparse.Namespace) -> int:
    """Like ``kafka-consumer-groups.sh --reset-offsets``: plan new committed offsets for a group
    with no active members and, with ``--execute``, commit them; without it, a dry run."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    admin = _admin(args)  # must outlive its futures
    group = args.group
    description, committed = _group_and_offsets(admin, group)
    if description.members:
        raise CliError(
            f"consumer group {group!r} has {len(description.members)} active member(s); offsets can "
            "only be reset while it has none: stop its consumers first"
        )
    topic, partitions = _topic_partitions(admin, args.topic)

    consumer = Consumer({**_client_config(args), "group.id": "pylog-cli-groups", "enable.auto.commit": False})
    try:
        bounds = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30) for p in partitions}
        by_time: dict[int, int] = {}
        if args.to_datetime is not None:
            millis = _datetime_millis(args.to_datetime)
            found = consumer.offsets_for_times([KafkaTopicPartition(topic, p, millis) for p in partitions], timeout=30)
            by_time = {tp.partition: tp.offset for tp in found}
    except KafkaException as error:
        raise CliError(f"reading offsets of {topic} failed: {error.args[0].str()}") from None
    finally:
        consumer.close()

    plan = []
    for p in partitions:
        low, high = bounds[p]
        if args.to_earliest:
            target = low
        elif args.to_latest:
            target = high
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.to_datetime is not None:
            target = by_time[p] if by_time[p] >= 0 else high  # nothing that late: the end, as Kafka does
        else:
            if (topic, p) not in committed:
                raise CliError(
                    f"{topic}-{p} has no committed offset to shift; use --to-earliest, --to-latest, "
                    "--to-offset or --to-datetime for it"
                )
            target = committed[(topic, p)] + args.shift_by
        plan.append((p, min(max(target, low), high)))  # kept within the log, as Kafka clamps

    rows = [(group, topic, str(p), str(offset)) for p, offset in plan]
    header = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    widths = [max([15, len(header[i])] + [len(row[i]) for row in rows]) for i in range(4)]
    print()
    for row in [header, *rows]:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if not args.execute:
        print("\nDry run: nothing was changed. Add --execute to commit these offsets.")
        return 0
    request = ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(topic, p, offset) for p, offset in plan])
    try:
        admin.alter_consumer_group_offsets([request], request_timeout=30)[group].result(timeout=30)
    except KafkaException as error:
        raise CliError(f"committing the new offsets of group {group!r} failed: {error.args[0].str()}") from None
    print(f"\nCommitted the new offsets of consumer group '{group}'.")
    return 0


def _topic_partitions(admin: Any, spec: str) -> tuple[str, list[int]]:
    """``TOPIC`` (all its partitions) or ``TOPIC:P,P,...``, checked against the cluster."""
    topic, _, wanted = spec.partition(":")
    metadata = admin.list_topics(timeout=30)
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        raise CliError(f"topic {topic!r} does not exist (list topics with `pylog topics list`)")
    existing = sorted(metadata.topics[topic].partitions)
    try:
        partitions = [int(p) for p in wanted.split(",")] if wanted else existing
    except ValueError:
        raise CliError(f"--topic takes TOPIC or TOPIC:P,P,...; got {spec!r}") from None
    missing = sorted(set(partitions) - set(existing))
    if missing:
        raise CliError(f"topic {topic!r} has no partition(s) {', '.join(map(str, missing))}")
    return topic, partitions


def _groups_delete_offsets(args: argparse.Namespace) -> int:
    """Like ``kafka-consumer-groups.sh --delete-offsets --group G --topic T``: forget the group's
    committed offsets of a topic (or some partitions of it) that no current member subscribes to."""
    from kafka_spark.cli.group_admin import GroupAdminError, delete_group_offsets
    from kafka_spark.common.kafka_errors import ErrorCode, error_name
    from kafka_spark.options import secured_connection

    group = args.group
    if secured_connection(_client_config(args)):
        raise CliError(
            "delete-offsets speaks to the group coordinator over plaintext connections only; against a "
            "cluster that needs TLS or SASL use kafka-consumer-groups --delete-offsets"
        )
    topic, partitions = _topic_partitions(_admin(args), args.topic)
    try:
        results = delete_group_offsets(_bootstrap(args), group, topic, partitions)
    except GroupAdminError as error:
        if error.code == ErrorCode.group_id_not_found:
            raise CliError(f"consumer group {group!r} does not exist (list groups with `pylog groups list`)") from None
        raise CliError(str(error)) from None
    except OSError as error:
        raise CliError(f"deleting offsets of group {group!r} failed: {error}") from None
    failed = {p: code for p, code in results.items() if code}
    print(
        ("Request succeed" if not failed else "Request failed")
        + f" for deleting offsets with topic {topic} group {group}"
    )
    rows = []
    for p in sorted(results):
        code = results[p]
        status = (
            "Successful"
            if not code
            else "Error: the group is subscribed to the topic; stop its consumers or change their subscription"
            if code == ErrorCode.group_subscribed_to_topic
            else f"Error: {error_name(code)}"
        )
        rows.append((topic, str(p), status))
    header = ("TOPIC", "PARTITION", "STATUS")
    widths = [max([15, len(header[i])] + [len(row[i]) for row in rows]) for i in range(3)]
    print()
    for row in [header, *rows]:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 1 if failed else 0


def _datetime_millis(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time (UTC unless it names an offset)."""
    import datetime as dt

    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--to-datetime takes an ISO 8601 date-time such as 2026-11-23T09:00:00, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _groups_delete(args: argparse.Namespace) -> int:
    """Like ``kafka-consumer-groups.sh --delete --group G``: only a group without active members,
    with its committed offsets."""
    from confluent_kafka import KafkaException

    admin = _admin(args)  # must outlive its futures
    group = args.group
    try:
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=30)
    except KafkaException as error:
        kafka_error = error.args[0]
        if kafka_error.name() == "NON_EMPTY_GROUP":
            raise CliError(f"consumer group {group!r} has active members; stop its consumers first") from None
        if kafka_error.name() == "GROUP_ID_NOT_FOUND":
            raise CliError(f"consumer group {group!r} does not exist (list groups with `pylog groups list`)") from None
        raise CliError(f"deleting consumer group {group!r} failed: {kafka_error.str()}") from None
    print(f"Deleted consumer group '{group}'.")
    return 0


# --- parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylog", description="pylog: embedded Kafka-compatible broker and tools")
    commands = parser.add_subparsers(dest="command", required=True)

    def client(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument("--bootstrap-server", help="HOST:PORT of any Kafka cluster (default: the local pylog broker)")
        sub.add_argument(
            "--command-config",
            metavar="FILE",
            help="Kafka client properties, e.g. security.protocol, sasl.mechanism, sasl.jaas.config",
        )
        return sub

    broker = commands.add_parser("broker", help="run or manage the local embedded broker")
    broker_commands = broker.add_subparsers(dest="action", required=True)
    start = broker_commands.add_parser(
        "start",
        help="run a broker in the foreground",
        description="Run a broker in the foreground. Settings come from Kafka's server.properties keys (a file, "
        "then --override KEY=VALUE, as kafka-server-start.sh takes them); the options below win over both.",
    )
    start.add_argument(
        "config",
        nargs="?",
        metavar="server.properties",
        help="a Kafka broker config file (listeners, log.dirs, num.partitions, log.retention.*, ...)",
    )
    start.add_argument(
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="a broker setting by its Kafka name, e.g. log.retention.hours=24 or log.flush.on.ack.all=false",
    )
    start.add_argument("--log-dir", help="data directory (default: $PYLOG_HOME/data, i.e. ~/.pylog/data)")
    start.add_argument("--host", help="address to bind (default 127.0.0.1)")
    start.add_argument("--port", type=int, help="port (default 9092; 0 = any free port)")
    start.add_argument("--advertised-host", help="host name clients should connect to (default: --host)")
    start.add_argument("--partitions", type=int, help="partitions of auto-created topics (default 1; num.partitions)")
    start.add_argument("--registered", action="store_true", help=argparse.SUPPRESS)  # on-demand start
    start.set_defaults(func=_broker_start)
    broker_commands.add_parser("status", help="show the local broker").set_defaults(func=_broker_status)
    broker_commands.add_parser("stop", help="stop the local broker").set_defaults(func=_broker_stop)

    topics = commands.add_parser("topics", help="create, list, describe, alter and delete topics")
    topic_commands = topics.add_subparsers(dest="action", required=True)
    create = client(topic_commands.add_parser("create", help="create a topic"))
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument(
        "--config", action="append", metavar="NAME=VALUE", help="topic config, e.g. cleanup.policy=compact"
    )
    create.add_argument("--if-not-exists", action="store_true", help="do nothing if the topic exists already")
    create.set_defaults(func=_topics_create)
    client(topic_commands.add_parser("list", help="list topics")).set_defaults(func=_topics_list)
    describe = client(topic_commands.add_parser("describe", help="partitions, offsets and configs of a topic"))
    describe.add_argument("name")
    describe.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")
    describe.set_defaults(func=_topics_describe)
    alter = client(
        topic_commands.add_parser(
            "alter", help="add partitions to a topic, set or remove its configs (kafka-topics/kafka-configs --alter)"
        )
    )
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="the new total number of partitions (only grows)")
    alter.add_argument(
        "--config", action="append", metavar="NAME=VALUE", help="set a topic config, e.g. retention.ms=3600000"
    )
    alter.add_argument(
        "--delete-config", action="append", metavar="NAME", help="remove a topic config (back to the default)"
    )
    alter.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")
    alter.set_defaults(func=_topics_alter)
    delete = client(topic_commands.add_parser("delete", help="delete a topic"))
    delete.add_argument("name")
    delete.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")
    delete.set_defaults(func=_topics_delete)

    cli_console.register(commands, client, _client_config, CliError, _progress)

    groups = commands.add_parser(
        "groups", help="list consumer groups, describe their offsets and lag, reset or delete offsets, delete groups"
    )
    group_commands = groups.add_subparsers(dest="action", required=True)
    client(group_commands.add_parser("list", help="list consumer groups")).set_defaults(func=_groups_list)
    describe_group = client(
        group_commands.add_parser(
            "describe", help="members, assignment, committed offset, log end offset and lag per partition"
        )
    )
    describe_group.add_argument("group")
    describe_group.set_defaults(func=_groups_describe)

    def offsets_command(name: str, help_text: str) -> argparse.ArgumentParser:
        """A ``groups`` command on a group's offsets of one topic (or some of its partitions)."""
        command = client(group_commands.add_parser(name, help=help_text))
        command.add_argument("group")
        command.add_argument(
            "--topic", required=True, metavar="TOPIC[:P,P...]", help="the topic, or some of its partitions"
        )
        return command

    reset = offsets_command(
        "reset-offsets",
        "set a group's committed offsets (kafka-consumer-groups --reset-offsets); a dry run unless --execute",
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within the log)")
    target.add_argument(
        "--to-datetime", metavar="ISO", help="the first offset at or after this time (UTC unless given)"
    )
    target.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (negative: back)")
    reset.add_argument("--execute", action="store_true", help="commit the offsets (without it: show them only)")
    reset.set_defaults(func=_groups_reset_offsets)
    offsets_command(
        "delete-offsets",
        "forget a group's committed offsets of a topic no member subscribes to "
        "(kafka-consumer-groups --delete-offsets)",
    ).set_defaults(func=_groups_delete_offsets)
    delete_group = client(
        group_commands.add_parser(
            "delete", help="delete a group that has no active members, with its committed offsets"
        )
    )
    delete_group.add_argument("group")
    delete_group.set_defaults(func=_groups_delete)
    cli_acls.register(commands, client, _client_config, CliError)
    cli_cluster.register(commands, client, _client_config, CliError)
    cli_users.register(commands, client, _client_config, CliError)
    sink = commands.add_parser("sink", help="maintain pylog-files sink outputs")
    sink_commands = sink.add_subparsers(dest="action", required=True)
    vacuum = sink_commands.add_parser("vacuum", help="delete files of failed attempts (never committed files)")
    vacuum.add_argument("path", help="the sink's output directory")
    vacuum.add_argument(
        "--older-than-seconds",
        type=int,
        default=3600,
        help="only files older than this (default 3600; keep it above your longest batch)",
    )
    vacuum.set_defaults(func=_sink_vacuum)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as error:
        print(f"pylog: {error}", file=sys.stderr)
        return 1
    except Exception as error:
        if not _is_client_failure(error):
            raise
        where = getattr(args, "reached", None) or "the cluster"
        detail = error.args[0].str() if error.args and hasattr(error.args[0], "str") else "no answer in time"
        print(
            f"pylog: {args.command} {getattr(args, 'action', '') or ''}".rstrip()
            + f" failed against {where}: {detail}; check that the broker runs and answers",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130


def _is_client_failure(error: Exception) -> bool:
    """A request the cluster did not answer (a timeout) or refused, not a bug of this tool."""
    import concurrent.futures

    from confluent_kafka import KafkaException

    return isinstance(error, (KafkaException, TimeoutError, concurrent.futures.TimeoutError))


if __name__ == "__main__":
    sys.exit(main())
