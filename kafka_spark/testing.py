"""pytest plugin: a Kafka-compatible broker for your pipeline tests, with no setup.

Installed with pylog (entry point ``pytest11``), so these fixtures are available in any test:

    def test_my_pipeline(pylog_broker, pylog_topic):
        topic = pylog_topic(partitions=3)          # a fresh, uniquely named topic
        producer = confluent_kafka.Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
        ...

``pylog_broker`` is one EmbeddedBroker per test session (temporary data, removed at the end);
``pylog_topic(partitions=1, name=None, config=None)`` creates a topic and returns its name.

``pylog_oauth_broker`` is a second session broker whose listener takes SASL/OAUTHBEARER only
(SASL_PLAINTEXT), validating unsecured JWTs as Kafka's default OAUTHBEARER validator does: any
client can name its principal, which is what a test of a login path needs. librdkafka logs in
with::

    {"bootstrap.servers": pylog_oauth_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
     "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
     "sasl.oauthbearer.config": "principal=alice"}

and kafka-python or aiokafka with a token provider returning
``kafka_spark.broker.oauthbearer.unsecured_token("alice")``.

``pylog_oidc`` is a local OpenID Connect provider (kafka_spark.testing_oidc: a client-credentials
token endpoint and a JWKS on loopback, with a client ``pylog_oidc.client_id`` /
``pylog_oidc.client_secret``), and ``pylog_oidc_broker`` a broker whose OAUTHBEARER listener
accepts only tokens signed by it (audience ``kafka``, its issuer), as a managed Kafka's would::

    {"bootstrap.servers": pylog_oidc_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
     "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
     "sasl.oauthbearer.token.endpoint.url": pylog_oidc.token_endpoint_url,
     "sasl.oauthbearer.client.id": pylog_oidc.client_id, "sasl.oauthbearer.client.secret": pylog_oidc.client_secret}

``pylog_cluster`` is a fresh three-broker EmbeddedCluster per test (replication factor 3, a
two-second broker session timeout so a killed broker is noticed fast), for testing a pipeline
through a broker failure:

    def test_survives_a_broker_loss(pylog_cluster):
        pylog_cluster.create_topic("orders", partitions=3, config={"min.insync.replicas": "2"})
        ...                                                   # start the pipeline
        pylog_cluster.kill_broker(pylog_cluster.leader("orders", 0))
        ...                                                   # it carries on

``pylog_broker_factory(**settings)`` starts a broker of the test's own with those settings
(``EmbeddedBroker``'s keyword arguments), closed when the test ends.

``pylog_broker_process(*args, port=0)`` starts ``pylog broker start`` in a process of its own
(data in the test's temporary directory, its own ``PYLOG_HOME``), for tests that kill a broker
with SIGKILL or run the command as a user does; every process it started is stopped when the test
ends. :class:`BrokerProcess` is the same launcher as a context manager, for other scopes:

    def test_acknowledged_records_survive_kill_9(pylog_broker_process):
        broker = pylog_broker_process()
        ...                                   # produce with acks=all to broker.bootstrap_servers
        broker.kill()                         # SIGKILL
        broker = pylog_broker_process(log_dir=broker.log_dir)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported lazily: loading this plugin must not start importing the broker
    from kafka_spark.broker import EmbeddedBroker, EmbeddedCluster
    from kafka_spark.testing_oidc import OidcProvider

_counter = itertools.count()


@pytest.fixture(scope="session")
def pylog_broker() -> Iterator[EmbeddedBroker]:
    """A broker for the whole test session, with temporary data. It is not registered for
    discovery, so tests never pick up (or replace) a broker the user runs: give your code
    ``pylog_broker.bootstrap_servers`` (e.g. the ``kafka.bootstrap.servers`` option).

    Its topics have Kafka's defaults (``retention.ms`` 7 days), but retention never runs on its
    own: records with fixed timestamps from the past (event-time fixtures) stay for the whole
    session instead of vanishing when a periodic check fires mid-test. A test of retention calls
    ``pylog_broker.run_retention()``."""
    from kafka_spark.broker import EmbeddedBroker

    # Members of consumer-protocol groups (KIP-848) heartbeat every second instead of Kafka's 5 s:
    # a group settles in a few heartbeats, and tests should not wait for them.
    with EmbeddedBroker(
        register=False, retention_check_interval_ms=None, group_consumer_heartbeat_interval_ms=1_000
    ) as broker:
        yield broker


@pytest.fixture(scope="session")
def pylog_oauth_broker() -> Iterator[EmbeddedBroker]:
    """A broker for the whole session whose listener is SASL_PLAINTEXT with OAUTHBEARER only,
    validating unsecured JWTs (alg none; the principal is the ``sub`` claim), as Kafka's
    ``OAuthBearerUnsecuredValidatorCallbackHandler``. Not registered for discovery."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(
        register=False,
        retention_check_interval_ms=None,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
        sasl_mechanisms=("OAUTHBEARER",),
    ) as broker:
        yield broker


@pytest.fixture(scope="session")
def pylog_oidc() -> Iterator[OidcProvider]:
    """A local OpenID Connect provider for the session (client-credentials grant, JWKS), with one
    client registered: ``pylog_oidc.client_id`` (the subject of its tokens, scope ``kafka``) and
    ``pylog_oidc.client_secret``. Register more with ``pylog_oidc.add_client(...)``."""
    from kafka_spark.testing_oidc import OidcProvider

    with OidcProvider() as provider:
        provider.add_client("pylog-client", scope="kafka")
        yield provider


@pytest.fixture(scope="session")
def pylog_oidc_broker(pylog_oidc: OidcProvider) -> Iterator[EmbeddedBroker]:
    """A broker for the session whose SASL_PLAINTEXT listener takes OAUTHBEARER tokens signed by
    ``pylog_oidc`` (checked against its JWKS, with its issuer and the audience ``kafka``), as
    Kafka's ``OAuthBearerValidatorCallbackHandler`` checks them. Not registered for discovery."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(
        register=False,
        retention_check_interval_ms=None,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
        sasl_mechanisms=("OAUTHBEARER",),
        sasl_oauthbearer_validator=pylog_oidc.validator(),
    ) as broker:
        yield broker


@pytest.fixture
def pylog_topic(pylog_broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory: ``pylog_topic(partitions=1, name=None, config=None) -> name``."""

    def create(partitions: int = 1, name: str | None = None, config: dict[str, str] | None = None) -> str:
        if name is None:
            base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
            name = f"{base}-{next(_counter)}"
        pylog_broker.create_topic(name, partitions=partitions, config=config)
        return name

    return create


@pytest.fixture
def pylog_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Factory: ``pylog_broker_factory(**settings) -> EmbeddedBroker``, a started broker of the
    test's own, for a test of broker settings (``EmbeddedBroker``'s keyword arguments, e.g.
    ``ssl_certfile`` or ``group_min_session_timeout_ms``) or of state the session's broker would
    mix with other tests' (its data in a new temporary directory unless ``log_dir`` is given;
    not registered for discovery unless ``register=True``). Every broker it started is closed
    when the test ends. A test that restarts its broker on the same data starts the next one
    with the first one's ``log_dir`` after closing it."""
    from kafka_spark.broker import EmbeddedBroker

    started: list[EmbeddedBroker] = []

    def start(**settings: Any) -> EmbeddedBroker:
        settings.setdefault("log_dir", tmp_path_factory.mktemp("pylog-broker"))
        settings.setdefault("register", False)
        broker = EmbeddedBroker(**settings).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.close()


@pytest.fixture
def pylog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """Three replicating brokers and their controller, with temporary data; one per test, since
    tests kill and restart its brokers."""
    from kafka_spark.broker import EmbeddedCluster

    with EmbeddedCluster(
        brokers=3,
        log_dir=tmp_path_factory.mktemp("pylog-cluster"),
        broker_session_timeout_ms=2_000,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
    ) as cluster:
        yield cluster


class BrokerProcess:
    """``pylog broker start ARGS`` (or another ``pylog`` command that prints
    ``bootstrap.servers=...`` once it serves, such as ``cluster start``) in a process of its own.

    Started on construction: returns once the command printed its bootstrap servers, or raises
    naming what it printed and its log. ``home`` becomes its ``PYLOG_HOME`` (its discovery
    registry; give the same ``env`` to ``pylog`` commands that should find it), ``log_dir`` its
    ``--log-dir`` and ``port`` its ``--port`` (None: neither option is passed, e.g. when a
    properties file sets the listeners). Its standard error goes to ``stderr`` (a path, or
    ``subprocess.DEVNULL``; by default ``<home>/broker.stderr``), never to a pipe nobody reads.
    ``new_session`` starts it in a session of its own (a broker started from its own terminal);
    ``end_with_parent`` has the kernel send it SIGTERM if this process dies first (Linux).
    """

    def __init__(
        self,
        *args: str,
        home: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        port: int | None = 0,
        command: Sequence[str] = ("broker", "start"),
        env: dict[str, str] | None = None,
        stderr: str | os.PathLike[str] | int | None = None,
        new_session: bool = False,
        end_with_parent: bool = False,
        startup_timeout_s: float = 120,
    ) -> None:
        self.home = Path(home) if home is not None else Path(tempfile.mkdtemp(prefix="pylog-broker-home-"))
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.env = dict(os.environ if env is None else env, PYLOG_HOME=str(self.home))
        options = [*(("--port", str(port)) if port is not None else ()), *args]
        if self.log_dir is not None:
            options += ["--log-dir", str(self.log_dir)]
        self.argv = [sys.executable, "-m", "kafka_spark.cli", *command, *options]
        self.stderr_path = (
            Path(stderr)
            if isinstance(stderr, (str, os.PathLike))
            else self.home / "broker.stderr"
            if stderr is None
            else None
        )
        self._stderr = stderr
        self._new_session = new_session
        self._end_with_parent = end_with_parent
        self._startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes]
        self.bootstrap_servers = ""
        self.start()

    @property
    def pid(self) -> int:
        """The process id of the running command."""
        return self.process.pid

    def start(self) -> BrokerProcess:
        """Start the command (again, after :meth:`stop` or :meth:`kill`: the same arguments, so
        the same data directory and, with a fixed ``port``, the same address)."""
        if self.stderr_path is not None:
            stderr: IO[bytes] | int = open(self.stderr_path, "ab")  # noqa: SIM115 - the child keeps its own copy
        else:
            stderr = self._stderr if isinstance(self._stderr, int) else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=self.env,
                start_new_session=self._new_session,
                preexec_fn=_end_with_parent if self._end_with_parent else None,
            )
        finally:
            if not isinstance(stderr, int):
                stderr.close()
        try:
            line = self._first_line()
        except BaseException:
            self.kill()
            raise
        if not line.startswith("bootstrap.servers="):
            self.kill()
            raise AssertionError(
                f"`pylog {' '.join(self.argv[3:])}` did not start: it printed {line!r}; its log:\n{self.stderr_text()}"
            )
        self.bootstrap_servers = line.split("=", 1)[1]
        return self

    def _first_line(self) -> str:
        """What the command printed first, read within the startup timeout (empty if it exited)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + self._startup_timeout_s
        out = bytearray()
        fd = self.process.stdout.fileno()
        readable = select.poll()  # not select(): a test process may hold over 1024 descriptors
        readable.register(fd, select.POLLIN)
        while not out.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not readable.poll(remaining * 1000):
                return f"nothing within {self._startup_timeout_s:g} s: {bytes(out)!r}"
            chunk = os.read(fd, 1)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace").strip()

    def stderr_text(self) -> str:
        """What the process wrote to its standard error (empty when it went to DEVNULL)."""
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")

    def running(self) -> bool:
        """Whether the command is still running."""
        return self.process.poll() is None

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, as a service manager stops it, and wait for it to exit (SIGKILL if it does
        not within ``timeout_s``); returns its exit status."""
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:  # a wedged broker must not outlive its test
                self.process.kill()
                self.process.wait(30)
        self._close_pipe()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or close anything."""
        if self.running():
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _end_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


@pytest.fixture
def pylog_broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """Factory: ``pylog_broker_process(*args, log_dir=None, port=0, **options) -> BrokerProcess``
    (see :class:`BrokerProcess`): ``pylog broker start`` in a process of its own, with data in a
    new temporary directory unless ``log_dir`` names one, and its own ``PYLOG_HOME``. Every
    process it started is stopped (SIGTERM, then SIGKILL) when the test ends."""
    started: list[BrokerProcess] = []

    def start(*args: str, **options: object) -> BrokerProcess:
        base = tmp_path_factory.mktemp("pylog-broker-process")
        options.setdefault("home", base / "home")
        options.setdefault("log_dir", base / "data")
        broker = BrokerProcess(*args, **options)  # type: ignore[arg-type]
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()
