"""``pylog cluster start | status``: a replicated embedded cluster on the command line.

    pylog cluster start --brokers 3 --log-dir D [--replication-factor 3] [--min-insync-replicas 2]
                                         foreground; prints bootstrap.servers=H:P,H:P,H:P
    pylog cluster status [--bootstrap-server H:P]      brokers and the controller

``start`` registers the cluster as the machine's local broker (as ``pylog broker start`` does), so
the other commands and ``format("pylog")`` without bootstrap servers find it while it runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def register(
    commands: Any,
    client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    client_config: Callable[..., dict[str, Any]],
    error: type[Exception],
) -> None:
    """Add ``cluster`` to the ``pylog`` command line (see cli_acls.register for the arguments)."""
    cluster = commands.add_parser("cluster", help="run a replicated embedded cluster, or show a cluster's brokers")
    actions = cluster.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="run N replicating brokers and their controller in the foreground")
    start.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    start.add_argument(
        "--log-dir",
        help="data directory, one sub-directory per broker (default: $PYLOG_HOME/cluster, i.e. ~/.pylog/cluster)",
    )
    start.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    start.add_argument(
        "--port", type=int, default=0, help="port of broker 0, the others on the next ones (default: any free ports)"
    )
    start.add_argument(
        "--replication-factor", type=int, help="default.replication.factor of new topics (default: min(3, brokers))"
    )
    start.add_argument("--min-insync-replicas", type=int, default=1, help="min.insync.replicas (default 1)")
    start.add_argument("--partitions", type=int, default=1, help="num.partitions of auto-created topics (default 1)")
    start.add_argument(
        "--unclean-leader-election",
        action="store_true",
        help="unclean.leader.election.enable: let an out-of-sync replica lead (may lose records)",
    )
    start.set_defaults(func=lambda args: _start(args, error))
    status = client(actions.add_parser("status", help="the cluster's brokers and its controller"))
    status.set_defaults(func=lambda args: _status(args, client_config))


def _start(args: argparse.Namespace, error: type[Exception]) -> int:
    from kafka_spark.broker import discovery
    from kafka_spark.broker.cluster.embedded import EmbeddedCluster

    running = discovery.find_running()
    if running is not None:
        raise error(str(discovery.BrokerAlreadyRunning(running)))
    log_dir = Path(args.log_dir) if args.log_dir else discovery.pylog_home() / "cluster"
    try:
        cluster = EmbeddedCluster(
            brokers=args.brokers,
            log_dir=log_dir,
            host=args.host,
            ports=[args.port + node for node in range(args.brokers)] if args.port else None,
            default_replication_factor=args.replication_factor,
            min_insync_replicas=args.min_insync_replicas,
            num_partitions=args.partitions,
            unclean_leader_election_enable=args.unclean_leader_election,
        )
    except ValueError as problem:
        raise error(str(problem)) from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start()
    except OSError as problem:
        raise error(f"cannot start the cluster: {problem}; choose other ports with --port") from None
    info = discovery.BrokerInfo(cluster.bootstrap_servers, os.getpid(), str(log_dir))
    try:
        discovery.register(info)
    except discovery.BrokerAlreadyRunning as problem:
        cluster.close()
        raise error(str(problem)) from None
    print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
    print(f"log.dirs={log_dir} controller={cluster.controller.image.controller_id}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        discovery.unregister(info)
        cluster.close()
        print("cluster stopped", file=sys.stderr, flush=True)
    return 0


def _status(args: argparse.Namespace, client_config: Callable[..., dict[str, Any]]) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(client_config(args)).list_topics(timeout=30)
    print(f"ClusterId: {metadata.cluster_id}\tController: {metadata.controller_id}\tBrokers: {len(metadata.brokers)}")
    for node_id in sorted(metadata.brokers):
        broker = metadata.brokers[node_id]
        role = "\tcontroller" if node_id == metadata.controller_id else ""
        print(f"\tBroker: {node_id}\t{broker.host}:{broker.port}{role}")
    return 0
