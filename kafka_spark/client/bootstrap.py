"""Which Kafka cluster a query talks to.

``kafka.bootstrap.servers`` given: that cluster, exactly as Spark's Kafka connector. Not given:
the local embedded broker — the one registered by ``pylog broker start`` (an in-process
EmbeddedBroker never registers), or one started now in the background with its data under
``$PYLOG_HOME/data`` (``~/.pylog/data``); see kafka_spark.broker.discovery. Every resolution is
logged, so it is never a mystery which broker a query used.

Resolution happens on the driver (Spark's planner worker); the address reaches executors inside
the tasks, so a Spark cluster never depends on a file on its executors' machines.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kafka_spark")


def resolve_bootstrap_servers(configured: str | None) -> str:
    if configured:
        log.info("pylog: using Kafka cluster at %s (kafka.bootstrap.servers)", configured)
        return configured
    from kafka_spark.broker import discovery

    running = discovery.find_running()
    if running is not None:
        log.info(
            "pylog: no kafka.bootstrap.servers; using the local embedded broker at %s (pid %d, data in %s)",
            running.bootstrap_servers,
            running.pid,
            running.log_dir,
        )
        return running.bootstrap_servers
    started = discovery.ensure_running()
    log.warning(
        "pylog: no kafka.bootstrap.servers and no local broker running; started an embedded broker at %s "
        "(data in %s; stop it with `pylog broker stop`)",
        started.bootstrap_servers,
        started.log_dir,
    )
    return started.bootstrap_servers
