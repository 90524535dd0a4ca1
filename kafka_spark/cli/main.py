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
import sys
from collections.abc import Sequence

from kafka_spark.cli import acls as cli_acls
from kafka_spark.cli import broker as cli_broker
from kafka_spark.cli import cluster as cli_cluster
from kafka_spark.cli import common
from kafka_spark.cli import console as cli_console
from kafka_spark.cli import groups as cli_groups
from kafka_spark.cli import topics as cli_topics
from kafka_spark.cli import users as cli_users
from kafka_spark.cli.common import CliError


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

    cli_broker.register(commands)
    cli_topics.register(commands, client)
    cli_console.register(commands, client, common.client_config, CliError, common.progress)

    cli_groups.register(commands, client)
    cli_acls.register(commands, client, common.client_config, CliError)
    cli_cluster.register(commands, client, common.client_config, CliError)
    cli_users.register(commands, client, common.client_config, CliError)
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
