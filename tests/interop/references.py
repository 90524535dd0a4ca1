"""The reference implementations, as resolved by scripts/fetch_references.sh.

- :class:`ApacheKafka`: a real single-node Apache Kafka (KRaft, combined broker and controller)
  run from the jars in ``.cache/kafka/libs``: storage formatted with ``kafka.tools.StorageTool``,
  then ``kafka.Kafka`` with a generated server.properties on free loopback ports. It has a
  PLAINTEXT listener, a SASL_PLAINTEXT listener taking SCRAM-SHA-256 and SCRAM-SHA-512 for
  the users given (their credentials are written into the metadata log at format time), and a
  SASL_PLAINTEXT listener taking OAUTHBEARER tokens, checked by Kafka's unsecured validator
  (``OAuthBearerUnsecuredValidatorCallbackHandler``: the token's ``sub`` and ``exp`` claims, no
  signature), whose connections re-authenticate when their token expires (KIP-368).
- :func:`kafka_tool`: runs one of Kafka's command-line tools by its main class, as the
  ``bin/kafka-*.sh`` scripts do.
- :func:`spark_kafka_jars`: the jars to put in ``spark.jars`` for Spark's ``format("kafka")``.

Used by tests/interop and by the benchmarks (which import this file by path). Nothing here
downloads anything: a missing cache is an error naming the script to run.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafka_spark.common.kafka_uuid import random_cluster_id

ROOT = Path(__file__).resolve().parents[2]
KAFKA_LIBS = ROOT / ".cache" / "kafka" / "libs"
SPARK_KAFKA_JARS = ROOT / ".cache" / "spark-kafka" / "jars"

#: The versions scripts/references/*.xml pin (checked against the jar names at use).
KAFKA_VERSION = "4.3.1"
SPARK_CONNECTOR_VERSION = "4.2.0"
#: The JAAS entry of the SCRAM listener: no users in it (kafka-storage format adds them, --add-scram).
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
#: The JAAS entry of the OAUTHBEARER listener (the broker's own unsecured login; clients bring theirs).
OAUTH_LOGIN_MODULE = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="broker";'
)

#: Main classes of the scripts in Kafka's bin/ (Kafka 4.x).
TOOLS = {
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-server-start": "kafka.Kafka",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
}

# A tool is a short-lived client: the client JIT tier starts it in a fraction of the time (the
# interop tests run dozens of them). The perf tools get the full JIT (``fast_start=False``).
_FAST_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")
# What bin/kafka-run-class.sh gives the broker (KAFKA_JVM_PERFORMANCE_OPTS).
_BROKER_JVM = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)


class ReferencesMissing(RuntimeError):
    """The Maven-resolved jars are not there: run scripts/fetch_references.sh (make bootstrap)."""


def _require(folder: Path, what: str) -> Path:
    if not (folder / ".resolved").is_file():
        raise ReferencesMissing(
            f"{what} is not in {folder}: run `bash scripts/fetch_references.sh` (make bootstrap does) "
            "to resolve it from Maven Central"
        )
    return folder


def kafka_classpath() -> str:
    """Apache Kafka's libs/ folder as a classpath."""
    return str(_require(KAFKA_LIBS, f"Apache Kafka {KAFKA_VERSION}") / "*")


def kafka_clients_jar() -> Path:
    return _require(KAFKA_LIBS, f"Apache Kafka {KAFKA_VERSION}") / f"kafka-clients-{KAFKA_VERSION}.jar"


def spark_kafka_jars() -> list[str]:
    """The jars Spark's Kafka connector needs beyond PySpark's own: those whose artifact PySpark
    does not ship already (as ``--packages`` would add them, minus duplicate versions of jars on
    Spark's classpath)."""
    import pyspark

    folder = _require(SPARK_KAFKA_JARS, f"Spark's Kafka connector {SPARK_CONNECTOR_VERSION}")
    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(jar) for jar in folder.glob("*.jar") if _artifact(jar.name) not in shipped)


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    stem = jar_name[: -len(".jar")]
    parts = stem.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def java_command(
    main_class: str,
    *args: str,
    heap: str = "256m",
    fast_start: bool = True,
    log_config: Path | None = None,
    extra_classpath: Sequence[str] = (),
) -> list[str]:
    """The command line that runs ``main_class`` of Kafka's libs (plus ``extra_classpath``)."""
    classpath = os.pathsep.join([*extra_classpath, kafka_classpath()])
    options = [f"-Xmx{heap}", "-Djava.awt.headless=true"]
    options += _FAST_START if fast_start else _BROKER_JVM
    options.append(f"-Dlog4j2.configurationFile={log_config or _quiet_log_config()}")
    return ["java", *options, "-cp", classpath, main_class, *args]


def kafka_tool(
    tool: str,
    *args: str,
    input: str | bytes | None = None,
    timeout: float = 120,
    check: bool = True,
    fast_start: bool = True,
    runner: ToolRunner | None = None,
) -> subprocess.CompletedProcess:
    """Run Kafka's ``tool`` (a key of :data:`TOOLS`) with ``args``, in ``runner``'s JVM or in a
    JVM of its own; output as text unless ``input`` is bytes. ``check``: raise with the tool's
    output when it exits non-zero."""
    text = not isinstance(input, bytes)
    if runner is not None:
        result = runner.run(TOOLS[tool], args, input, timeout)
    else:
        command = java_command(TOOLS[tool], *args, fast_start=fast_start)
        result = subprocess.run(command, input=input, capture_output=True, timeout=timeout, text=text)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} exited {result.returncode}:\nstdout: {result.stdout}\nstderr: {result.stderr}"
        )
    return result


class ToolRunner:
    """One JVM running Kafka's tools one after another (tests/interop/java/ToolRunner.java):
    a tool then takes a fraction of a second instead of a JVM start. Thread-safe (one tool at a
    time). A tool that does not finish within its timeout gets the JVM killed (the next tool
    starts a new one) and raises ``subprocess.TimeoutExpired``."""

    def __init__(self, classes: Path) -> None:
        self._classes = classes
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    @classmethod
    def compiled(cls, workdir: Path) -> ToolRunner:
        source = Path(__file__).parent / "java" / "ToolRunner.java"
        subprocess.run(
            ["javac", "-d", str(workdir), "-cp", str(kafka_clients_jar()), str(source)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        return cls(workdir)

    def start(self) -> None:
        """Start the JVM now rather than with the first tool."""
        with self._lock:
            self._start()

    def _start(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            command = java_command(
                "ToolRunner", heap="384m", log_config=_following_log_config(), extra_classpath=[str(self._classes)]
            )
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
            )
        return self._process

    def run(
        self, main_class: str, args: Sequence[str], input: str | bytes | None, timeout: float
    ) -> subprocess.CompletedProcess:
        def encode(value: str | bytes) -> str:
            return base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode()

        request = (
            " ".join(
                [encode(main_class), "-" if input is None else encode(input) or "-", *(encode(arg) for arg in args)]
            )
            + "\n"
        )
        with self._lock:
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(request.encode())
            answer: list[bytes] = []
            reader = threading.Thread(target=lambda: answer.append(process.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if not answer or not answer[0].startswith(b"RESULT "):
                self._kill()
                if not answer:
                    raise subprocess.TimeoutExpired([main_class, *args], timeout)
                raise RuntimeError(f"the tool runner JVM ended while running {main_class} {' '.join(args)}")
        _, code, out, err = answer[0].rstrip(b"\n").split(b" ")
        stdout, stderr = base64.b64decode(out), base64.b64decode(err)
        if not isinstance(input, bytes):
            stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
        return subprocess.CompletedProcess([main_class, *args], int(code), stdout, stderr)

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(30)
            self._process = None

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.stdin is not None:
                self._process.stdin.close()
                try:
                    self._process.wait(30)
                except subprocess.TimeoutExpired:
                    pass
            self._kill()


_QUIET = """status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


def _quiet_log_config() -> Path:
    """Warnings and errors to stderr, as Kafka's tools-log4j2 does."""
    return _log_config_file("quiet", _QUIET)


def _following_log_config() -> Path:
    """:func:`_quiet_log_config`, to the stderr the tool runner gives each tool."""
    return _log_config_file("following", _QUIET + "appender.err.follow = true\n")


def _log_config_file(name: str, text: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"pylog-kafka-tools-log4j2-{name}-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != text:
        partial = path.with_suffix(f".{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)
    return path


def free_port() -> int:
    """A free TCP port on loopback (Kafka takes no port 0). Another process may take it before
    Kafka binds: :class:`ApacheKafka` retries on a bind failure."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ApacheKafka:
    """One Apache Kafka node in KRaft mode (broker and controller in one JVM).

    ``start()`` formats a fresh log directory and starts the JVM, returning once the PLAINTEXT
    listener answers a Metadata request; ``stop()`` ends it (SIGTERM, then SIGKILL) and removes
    the data. ``overrides`` are extra server.properties lines (e.g. ``flush.messages``);
    ``node_id`` is the node's id (1 by default; pylog's single node is 0).
    """

    scram_users: dict[str, str] = field(default_factory=dict)
    heap: str = "512m"
    node_id: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="apache-kafka-")))
    port: int = 0
    sasl_port: int = 0
    oauth_port: int = 0
    process: subprocess.Popen | None = None
    #: seconds from format to the first answered Metadata request, and the JVM's resident set
    #: size after start (KiB); for the report of what the fixture costs.
    start_seconds: float = 0.0

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def oauth_bootstrap_servers(self) -> str:
        """The OAUTHBEARER listener (SASL_PLAINTEXT, unsecured tokens)."""
        return f"127.0.0.1:{self.oauth_port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "logs" / "server.log"

    def rss_kib(self) -> int:
        """The broker JVM's resident set size now."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def _properties(self, controller_port: int) -> str:
        mechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"
        lines = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"OAUTH://127.0.0.1:{self.oauth_port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"OAUTH://127.0.0.1:{self.oauth_port}"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": mechanisms,
            "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oauth.oauthbearer.sasl.jaas.config": OAUTH_LOGIN_MODULE,
            # A session ends when its token expires (or after an hour): the client must log in
            # again with a new token, as against a managed service (KIP-368).
            "listener.name.oauth.oauthbearer.connections.max.reauth.ms": "3600000",
            **{
                f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config": SCRAM_LOGIN_MODULE
                for mechanism in mechanisms.split(",")
            },
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            # One node: the internal topics have one replica, and few partitions start faster.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Consumer-protocol groups (KIP-848) move one heartbeat at a time: the tests' brokers
            # both heartbeat every second (Kafka's default and minimum are 5 s).
            "group.consumer.heartbeat.interval.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "num.io.threads": "4",
            "num.network.threads": "2",
            **self.overrides,
        }
        return "".join(f"{key}={value}\n" for key, value in lines.items())

    def _log_config(self) -> Path:
        path = self.workdir / "log4j2.properties"
        path.write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {self.log_file}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = file\n"
            "logger.kafka.name = org.apache.kafka\nlogger.kafka.level = INFO\n"
        )
        return path

    def start(self, timeout: float = 180) -> ApacheKafka:
        begin = time.monotonic()
        for attempt in range(3):  # a picked port may be taken by another process meanwhile
            self.port, self.sasl_port, self.oauth_port = free_port(), free_port(), free_port()
            controller_port = free_port()
            shutil.rmtree(self.workdir / "data", ignore_errors=True)
            (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
            properties = self.workdir / "server.properties"
            properties.write_text(self._properties(controller_port))
            log_config = self._log_config()
            scram = [
                arg
                for user, password in self.scram_users.items()
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")
            ]
            subprocess.run(
                java_command(
                    TOOLS["kafka-storage"],
                    "format",
                    "-t",
                    random_cluster_id(),
                    "-c",
                    str(properties),
                    "--ignore-formatted",
                    *scram,
                    heap="256m",
                ),
                check=True,
                capture_output=True,
                timeout=timeout,
            )
            self.process = subprocess.Popen(
                java_command(
                    TOOLS["kafka-server-start"],
                    str(properties),
                    heap=self.heap,
                    fast_start=False,
                    log_config=log_config,
                ),
                stdout=subprocess.DEVNULL,
                stderr=open(self.workdir / "logs" / "stderr.log", "wb"),
                start_new_session=True,
            )
            if self._wait_ready(begin + timeout * (attempt + 1) / 3):
                self.start_seconds = time.monotonic() - begin
                return self
            self._kill()
        raise RuntimeError(f"Apache Kafka did not start; its log: {self.log_file}\n{self._log_tail()}")

    def _wait_ready(self, deadline: float) -> bool:
        """Until the log says the server started and the PLAINTEXT listener accepts."""
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False  # exited (e.g. a port taken): the caller retries on new ports
            if self.log_file.exists() and "Kafka Server started" in self.log_file.read_text(errors="replace"):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 2):
                    return True
            time.sleep(0.1)
        return False

    def _log_tail(self, lines: int = 40) -> str:
        texts = []
        for path in (self.log_file, self.workdir / "logs" / "stderr.log"):
            if path.exists():
                texts.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(texts)

    def _kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self.process = None

    def stop(self) -> None:
        self._kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def apache_kafka(**settings) -> Iterator[ApacheKafka]:
    """An :class:`ApacheKafka` for the ``with`` block."""
    with ApacheKafka(**settings) as kafka:
        yield kafka
