"""`pylog groups`: list consumer groups, describe their offsets and lag, reset or delete their
offsets and delete groups, as kafka-consumer-groups does.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from kafka_spark.cli import common
from kafka_spark.cli.common import CliError


def _groups_list(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = common.admin(args)  # must outlive its futures: a destroyed client answers them empty
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
    description, committed = _group_and_offsets(common.admin(args), group)
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
            **common.client_config(args),
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

    admin = common.admin(args)  # must outlive its futures
    group = args.group
    description, committed = _group_and_offsets(admin, group)
    if description.members:
        raise CliError(
            f"consumer group {group!r} has {len(description.members)} active member(s); offsets can "
            "only be reset while it has none: stop its consumers first"
        )
    topic, partitions = _topic_partitions(admin, args.topic)

    consumer = Consumer({**common.client_config(args), "group.id": "pylog-cli-groups", "enable.auto.commit": False})
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
    if secured_connection(common.client_config(args)):
        raise CliError(
            "delete-offsets speaks to the group coordinator over plaintext connections only; against a "
            "cluster that needs TLS or SASL use kafka-consumer-groups --delete-offsets"
        )
    topic, partitions = _topic_partitions(common.admin(args), args.topic)
    try:
        results = delete_group_offsets(common.bootstrap(args), group, topic, partitions)
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

    admin = common.admin(args)  # must outlive its futures
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


def register(commands: Any, client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]) -> None:
    """``pylog groups list | describe | reset-offsets | delete-offsets | delete``."""
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
