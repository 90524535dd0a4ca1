"""`pylog topics`: create, list, describe, alter and delete topics, as kafka-topics and
kafka-configs do, against any Kafka cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from kafka_spark.cli import common
from kafka_spark.cli.common import CliError


def _topic_exists(args: argparse.Namespace) -> bool:
    # All topics, not list_topics(topic=NAME): asking for one topic lets the broker auto-create it.
    topic = common.admin(args).list_topics(timeout=30).topics.get(args.name)
    return topic is not None and topic.error is None


def _topics_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = dict(common.key_value(item, "--config") for item in args.config or [])
    topic = NewTopic(
        args.name, num_partitions=args.partitions, replication_factor=args.replication_factor, config=configs
    )
    admin = common.admin(args)  # must outlive its futures: a destroyed client fails them
    if common.wait(
        admin.create_topics([topic], operation_timeout=30),
        "create topic",
        tolerate="TOPIC_ALREADY_EXISTS" if args.if_not_exists else None,
    ):
        print(f"Created topic {args.name}.")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    metadata = common.admin(args).list_topics(timeout=30)
    for name in sorted(metadata.topics):
        print(name)
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    # All topics, not list_topics(topic=NAME): asking for one topic lets the broker auto-create it.
    metadata = common.admin(args).list_topics(timeout=30)
    topic = metadata.topics.get(args.name)
    if topic is None or topic.error is not None:
        if args.if_exists:
            return 0
        raise CliError(f"topic {args.name!r} does not exist (list topics with `pylog topics list`)")
    configs = _topic_overrides(args, args.name)
    consumer = Consumer(common.client_config(args, **{"group.id": "pylog-cli-describe", "enable.auto.commit": False}))
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
    admin = common.admin(args)
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
    admin = common.admin(args)
    if args.partitions is not None:
        common.wait(
            admin.create_partitions([NewPartitions(args.name, args.partitions)], operation_timeout=30),
            "add partitions to topic",
        )
        print(f"Topic {args.name} has {args.partitions} partitions now.")
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (common.key_value(item, "--config") for item in args.config or [])
    ]
    entries += [
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in args.delete_config or []
    ]
    if entries:
        resource = ConfigResource("topic", args.name, incremental_configs=entries)
        common.wait(admin.incremental_alter_configs([resource]), "alter configs of topic")
        print(f"Altered the configs of topic {args.name}.")
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    admin = common.admin(args)
    if common.wait(
        admin.delete_topics([args.name], operation_timeout=30),
        "delete topic",
        tolerate="UNKNOWN_TOPIC_OR_PART" if args.if_exists else None,
    ):
        print(f"Deleted topic {args.name}.")
    return 0


def register(commands: Any, client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]) -> None:
    """``pylog topics create | list | describe | alter | delete``."""
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
