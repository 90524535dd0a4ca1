"""EmbeddedBroker: a Kafka-compatible broker running in a background thread of this process.

    with EmbeddedBroker() as broker:
        broker.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

``log_dir=None`` keeps data in a temporary directory removed on close; a given ``log_dir``
persists across restarts (the broker recovers its logs on start).

An EmbeddedBroker is private to the code that started it: it does not register in
``$PYLOG_HOME/broker.json`` (kafka_spark.broker.discovery), so starting and closing one never
disturbs the machine's discovery broker (``pylog broker start``). Give its
``bootstrap_servers`` to clients and queries (``kafka.bootstrap.servers``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from kafka_spark.broker import discovery, meta_properties
from kafka_spark.broker.broker import Broker
from kafka_spark.broker.config import BrokerConfig
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.server import BrokerServer
from kafka_spark.broker.storage.config import LogConfig

logger = logging.getLogger("kafka_spark.broker")

T = TypeVar("T")

# BrokerConfig fields EmbeddedBroker passes through as keyword arguments (the others have
# parameters of their own, or are what the broker decides itself).
_SETTABLE = frozenset(field.name for field in dataclasses.fields(BrokerConfig)) - {
    "log_dir",
    "host",
    "port",
    "advertised_host",
    "auto_create_topics_enable",
    "num_partitions",
    "log",
    "log_retention_check_interval_ms",
}


class EmbeddedBroker:
    """A one-node broker serving the Kafka protocol on ``host:port`` (port 0 = any free port).

    Thread-safe: its methods may be called from any thread; the broker itself runs on its own
    event loop thread.
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        num_partitions: int = 1,
        auto_create_topics: bool = True,
        log_config: LogConfig | None = None,
        retention_check_interval_ms: int | None = 300_000,
        advertised_host: str | None = None,
        register: bool = False,
        **broker_settings: Any,
    ) -> None:
        """``broker_settings``: any other :class:`BrokerConfig` field, e.g.
        ``producer_id_expiration_ms=60_000`` or ``transactional_id_expiration_ms=...``.

        ``register=True`` makes this the machine's discovery broker, as ``pylog broker start``
        does: :meth:`start` then raises :class:`~kafka_spark.broker.discovery.BrokerAlreadyRunning`
        if another live broker is registered.

        ``retention_check_interval_ms``: how often retention runs (Kafka's
        ``log.retention.check.interval.ms``); ``None``: never on its own (call
        ``run_retention()``), as the test fixture's broker does."""
        unknown = set(broker_settings) - _SETTABLE
        if unknown:
            raise TypeError(
                f"EmbeddedBroker got unknown setting(s) {', '.join(sorted(unknown))}; "
                f"the broker settings are {', '.join(sorted(_SETTABLE))}"
            )
        self._temporary = log_dir is None
        self.log_dir = Path(tempfile.mkdtemp(prefix="pylog-broker-")) if log_dir is None else Path(log_dir)
        self.config = BrokerConfig(
            log_dir=self.log_dir,
            host=host,
            port=port,
            advertised_host=advertised_host,
            auto_create_topics_enable=auto_create_topics,
            num_partitions=num_partitions,
            log=log_config or LogConfig(),
            log_retention_check_interval_ms=300_000
            if retention_check_interval_ms is None
            else retention_check_interval_ms,
            **broker_settings,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: Broker | None = None
        self._server: BrokerServer | None = None
        self._retention: asyncio.TimerHandle | None = None
        self._retention_checks = retention_check_interval_ms is not None
        self._register = register
        self._registered: discovery.BrokerInfo | None = None
        self._cluster_id_given = "cluster_id" in broker_settings

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        """Start serving on a thread of its own (a second call does nothing); returns the broker."""
        if self._thread is not None:
            return self
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # The cluster id is the log directory's (meta.properties), kept across restarts as Kafka keeps it.
        stored = meta_properties.stored_cluster_id(self.log_dir)
        if stored is not None and not self._cluster_id_given:
            self.config = dataclasses.replace(self.config, cluster_id=stored)
        meta_properties.claim(self.log_dir, self.config.cluster_id, self.config.node_id)
        started: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="pylog-broker", daemon=True)
        self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join(timeout=30)
            self._thread = None  # not started: start() may be called again
            raise
        if self._register:
            # Lets the CLI and the pylog source find this broker with no address given.
            info = discovery.BrokerInfo(self.bootstrap_servers, os.getpid(), str(self.log_dir))
            try:
                discovery.register(info)
            except discovery.BrokerAlreadyRunning:
                self.close()
                raise
            self._registered = info
        logger.info("embedded broker listening on %s (log dir %s)", self.bootstrap_servers, self.log_dir)
        return self

    def _run(self, started: Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._broker = self._make_broker(loop)
            self._broker.notifier.bind_thread()
            self._server = BrokerServer(self._broker)
            # Bound (the controller learns the port) but not listening until the node has
            # registered and applied its cluster's metadata (led its partitions, loaded its
            # coordinators), as Kafka opens request processing only when its broker has caught up:
            # a broker answering first would answer from no metadata.
            loop.run_until_complete(self._server.start(serve=False))
            self._broker.start()
            loop.run_until_complete(self._server.start_serving())
        except BaseException as error:  # noqa: BLE001 surface start-up failures (port in use, bad log dir) to start()
            self._unwind_failed_start(loop)
            started.set_exception(error)
            return
        self._schedule_retention()
        started.set_result(None)
        loop.run_forever()
        _finish_tasks(loop)
        loop.close()

    def _unwind_failed_start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Release what a start that failed part way holds (the listener, the log directory's lock,
        the log cleaner's thread), so that the same directory can be started again at once (a
        cluster's node retries on another port when its old one was taken meanwhile)."""
        try:
            if self._server is not None:
                loop.run_until_complete(self._server.stop())
            if self._broker is not None:
                self._broker.close()
            _finish_tasks(loop)
        except Exception:  # noqa: BLE001 the start-up failure is what the caller must see
            logger.exception("embedded broker: releasing a failed start failed")
        finally:
            self._server = self._broker = None
            loop.close()

    def _make_broker(self, loop: asyncio.AbstractEventLoop) -> Broker:
        """The node, made on its event loop's thread: a cluster of one, its own controller (a
        cluster's nodes share theirs, ClusterNode)."""
        return Broker(self.config, loop)

    #: Leave the cluster as a crash would (ClusterNode.kill): no controlled shutdown.
    _killed = False

    def _schedule_retention(self) -> None:
        assert self._loop is not None and self._broker is not None
        if not self._retention_checks:
            return
        interval = self.config.log_retention_check_interval_ms / 1000

        def tick() -> None:
            assert self._broker is not None
            self._broker.run_retention()
            self._retention = self._loop.call_later(interval, tick)  # type: ignore[union-attr]

        self._retention = self._loop.call_later(interval, tick)

    def close(self) -> None:
        """Stop serving and close the log files (a second call does nothing)."""
        if self._thread is None:
            return
        loop = self._loop
        assert loop is not None
        if self._registered is not None:
            discovery.unregister(self._registered)
            self._registered = None
        if self._retention is not None:
            loop.call_soon_threadsafe(self._retention.cancel)
        if self._broker is not None:
            self._call(self._leave(controlled=not self._killed))
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=30)
        self._thread = None
        if self._broker is not None:
            self._broker.close()
        if self._temporary:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    async def _leave(self, controlled: bool) -> None:
        assert self._broker is not None
        self._broker.stop(controlled)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- what users need -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the broker listens on (the chosen one when ``port=0``)."""
        if self._broker is None:
            raise RuntimeError("the broker is not started; use `with EmbeddedBroker() as broker:`")
        return self._broker.port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` to give Kafka clients as bootstrap.servers."""
        return f"{self.config.advertised}:{self.port}"

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        """Create a topic (raises TopicExistsError if it exists)."""
        self._call(self._create_topic(name, partitions, config))

    async def _create_topic(self, name: str, partitions: int, config: dict[str, str] | None) -> None:
        assert self._broker is not None
        self._broker.replicas.create_topic(name, partitions, None, config or {})

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its log files."""
        self._call(self._delete_topic(name))

    async def _delete_topic(self, name: str) -> None:
        assert self._broker is not None
        self._broker.replicas.delete_topic(name)
        self._broker.notifier.notify()

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count."""
        return self._call(self._topics())

    async def _topics(self) -> dict[str, int]:
        assert self._broker is not None
        return {
            name: info.partitions
            for name, info in self._broker.replicas.topics().items()
            if not is_internal_topic(name)
        }

    def run_retention(self) -> None:
        """Apply retention now instead of waiting for the periodic check."""
        self._call(self._run_retention())

    async def _run_retention(self) -> None:
        assert self._broker is not None
        self._broker.run_retention()

    def run_cleaner(self, force: bool = False) -> Any:
        """Run log compaction now instead of waiting for the cleaner thread (safe from any thread);
        ``force`` ignores min.cleanable.dirty.ratio. Returns the cleaner's statistics."""
        return self.broker.logs.run_cleaner(force=force)

    @property
    def broker(self) -> Broker:
        """The node itself, for tests and tools in this process."""
        if self._broker is None:
            raise RuntimeError("the broker is not started")
        return self._broker

    @property
    def server(self) -> BrokerServer:
        """The listener and its connections (``server.memory`` is their memory), for tests and tools
        in this process."""
        if self._server is None:
            raise RuntimeError("the broker is not started")
        return self._server

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None or self._thread is None:
            coroutine.close()
            raise RuntimeError("the broker is not started; use `with EmbeddedBroker() as broker:`")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs when the broker stops (a transaction marker on its way to another
    broker, a request parked in a coordinator) and let it unwind while the loop is open, as
    ``asyncio.run`` does: a task left pending would be closed by the garbage collector later, its
    cleanup then scheduling callbacks on a closed loop."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=10))
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                logger.debug("broker task %s ended with %r while stopping", task.get_name(), task.exception())
    loop.run_until_complete(loop.shutdown_asyncgens())
