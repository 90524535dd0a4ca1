"""`pylog broker start | status | stop`: the local embedded broker in the foreground, and the
registered one found or stopped.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from kafka_spark.cli.common import CliError


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
        mechanisms = f" sasl.enabled.mechanisms={','.join(config.sasl_mechanisms)}" if config.sasl_enabled else ""
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


def register(commands: Any) -> None:
    """``pylog broker start | status | stop``."""
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
