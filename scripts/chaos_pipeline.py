"""Chaos: a streaming pipeline whose Spark driver is killed with SIGKILL again and again.

Embedded broker (its own process) -> pylog source -> transform -> exactly-once sink (the
``pylog-files`` file sink or the ``pylog`` topic sink), while a producer keeps writing sequenced
records. The driver (JVM and Python workers: its whole process group) is killed at random
moments after it starts — which, with 200 ms micro-batches, lands during task writes, between
the writes and the sink commit, and between the sink commit and Spark's commit log — and
restarted from its checkpoint each time. At the end the producer stops, the pipeline drains,
and the output must hold every acknowledged input exactly once: read with stock
``spark.read.parquet`` (files) or a read_committed consumer (topic).

    python scripts/chaos_pipeline.py --sink files|files-nokafka|topic --kills 50 --seed 1

``files`` writes the Quickstart's shape (partition, offset, seq10: no topic column),
``files-nokafka`` an output with no Kafka column at all (seq10, label).

With ``--new-query-at K`` (file sinks), before the K-th driver the pipeline's checkpoint is
"lost": first a new query with a fresh checkpoint and the same options (startingOffsets
earliest) must be refused by the sink without committing anything, then the checkpoint is
deleted and every later driver starts from the output's offsets (startingOffsetsFromOutput).

Random moments hit the short windows of the commit protocols only now and then. With ``--aim``,
the first kills strike inside the windows given, one each, in order (scripts/chaos_hooks, loaded
into the driver's Python processes, does the killing and records where it struck); the remaining
kills are random:

    python scripts/chaos_pipeline.py --sink files --kills 10 \
        --aim files-written,sidecar-written,manifest-published,batch-planned,spark-committed
    python scripts/chaos_pipeline.py --sink topic --kills 10 --aim transaction-open,transaction-committed

``--bootstrap-server HOST:PORT`` runs the pipeline against that cluster (e.g. Apache Kafka)
instead of a pylog broker process of its own; its topics get names of their own there.

Prints ``chaos: sink=... kills=... input=N output=N duplicates=0 missing=0 OK`` and exits 0, or
the same line with FAILED and exits 1; with --aim, the line also lists where each kill struck and
is FAILED if a driver did not reach its phase (the line says whether it exited or ran out of time).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from _harness import pylog_broker_process  # noqa: E402


def produce_forever(bootstrap: str, topic: str, stop: threading.Event, acknowledged: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    seq = 0

    def on_delivery(error, message) -> None:  # noqa: ANN001
        if error is None:
            acknowledged.append(int(message.value()))

    while not stop.is_set():
        for _ in range(20):
            producer.produce(topic, value=b"%d" % seq, on_delivery=on_delivery)
            seq += 1
        producer.poll(0)
        time.sleep(0.05)
    producer.flush(30)


def driver(
    bootstrap: str,
    source: str,
    sink: str,
    output: str,
    checkpoint: str,
    mode: str,
    env: dict[str, str] | None = None,
    from_output: bool = False,
    log: str | None = None,
) -> subprocess.Popen:
    """Start a driver in its own process group; its output goes to ``log`` (kept when a run fails)."""
    args = [sys.executable, os.path.join(HERE, "chaos_driver.py"), bootstrap, source, sink, output, checkpoint, mode]
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            args + (["from-output"] if from_output else []),
            start_new_session=True,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        if log:
            out.close()


def manifest_ids(output: str) -> list[str]:
    directory = os.path.join(output, "_spark_metadata")
    return sorted(n for n in os.listdir(directory) if not n.startswith(".")) if os.path.isdir(directory) else []


def new_query_on_the_output(bootstrap: str, source: str, sink: str, output: str, checkpoint: str, work: str) -> str:
    """A fresh checkpoint with the same options must be refused, committing nothing; then the
    pipeline's checkpoint is lost. Returns what happened, for the summary line."""
    before = manifest_ids(output)
    probe = driver(
        bootstrap,
        source,
        sink,
        output,
        os.path.join(work, "probe-checkpoint"),
        "probe",
        log=os.path.join(work, "probe.log"),
    )
    code = probe.wait(timeout=DRAIN_TIMEOUT_S)
    after = manifest_ids(output)
    if code != 3 or after != before:
        return f"new-query=NOT-REFUSED(exit {code}, manifests {len(before)}->{len(after)})"
    subprocess.run(["rm", "-rf", checkpoint], check=True)
    return "new-query=refused,checkpoint-lost"


AIM_TIMEOUT_S = 600.0  # how long an aimed driver may take to reach its phase (Spark starts slowly under load)
DRAIN_TIMEOUT_S = 3600.0  # how long the final drain (and the new-query probe) may take


def _hook_phases() -> tuple[str, ...]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("chaos_hooks", os.path.join(HERE, "chaos_hooks", "sitecustomize.py"))
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)  # installs nothing: PYLOG_CHAOS_AIM is not set in this process
    return hooks.PHASES


def aimed_env(phase: str, counter: str, at: int) -> dict[str, str]:
    """The environment of a driver that scripts/chaos_hooks kills at the ``at``-th ``phase``."""
    hooks = os.path.join(HERE, "chaos_hooks")
    path = os.pathsep.join(p for p in (hooks, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, PYLOG_CHAOS_AIM=phase, PYLOG_CHAOS_COUNTER=counter, PYLOG_CHAOS_AT=str(at))


def read_output(sink: str, bootstrap: str, output: str) -> list[int]:
    """The sequence numbers in the output: stock Spark's parquet reader, or a read_committed consumer."""
    if sink.startswith("files"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        try:
            return [row.seq10 // 10 for row in spark.read.parquet(output).select("seq10").collect()]
        finally:
            spark.stop()
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(output, p, OFFSET_BEGINNING) for p in range(2)])
    values, eof = [], set()
    deadline = time.monotonic() + 120
    while len(eof) < 2 and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.5):
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(message.error().str())
                eof.add(message.partition())
            else:
                values.append(int(message.value()) // 10)
    consumer.close()
    return values


@contextlib.contextmanager
def cluster(bootstrap: str | None) -> Iterator[tuple[str, str, str]]:
    """(bootstrap servers, input topic, output topic): a pylog broker process of our own, or the
    cluster given with fresh topic names."""
    from confluent_kafka.admin import AdminClient, NewTopic

    with contextlib.ExitStack() as stack:
        suffix = ""
        if bootstrap is None:
            bootstrap = stack.enter_context(pylog_broker_process(partitions=3))
        else:
            suffix = f"-{uuid.uuid4().hex[:8]}"
        source, output = f"chaos-in{suffix}", f"chaos-out{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic(source, num_partitions=3), NewTopic(output, num_partitions=2)]
        for future in admin.create_topics(topics).values():
            future.result(timeout=30)
        yield bootstrap, source, output


def run(
    sink: str,
    kills: int,
    seed: int,
    min_s: float = 4.0,
    max_s: float = 12.0,
    aim: list[str] | None = None,
    bootstrap_server: str | None = None,
    new_query_at: int | None = None,
) -> bool:
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix=f"pylog-chaos-{sink}-")
    with cluster(bootstrap_server) as (bootstrap, source, output_topic):
        output = os.path.join(work, "out") if sink.startswith("files") else output_topic
        checkpoint = os.path.join(work, "checkpoint")
        acknowledged: list[int] = []
        stop = threading.Event()
        writer = threading.Thread(target=produce_forever, args=(bootstrap, source, stop, acknowledged), daemon=True)
        writer.start()
        struck: list[str] = []
        new_query = ""
        from_output = False
        try:
            for kill in range(kills):
                if kill == new_query_at:
                    new_query = new_query_on_the_output(bootstrap, source, sink, output, checkpoint, work) + " "
                    from_output = True
                log = os.path.join(work, f"driver-{kill}.log")
                if kill >= len(aim or ()):
                    process = driver(
                        bootstrap, source, sink, output, checkpoint, "run", from_output=from_output, log=log
                    )
                    time.sleep(rng.uniform(min_s, max_s))
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    continue
                phase = aim[kill]
                counter = os.path.join(work, f"kill-{kill}")
                process = driver(
                    bootstrap,
                    source,
                    sink,
                    output,
                    checkpoint,
                    "run",
                    aimed_env(phase, counter, rng.randint(1, 3)),
                    from_output=from_output,
                    log=log,
                )
                try:
                    why = f"exited with {process.wait(timeout=AIM_TIMEOUT_S)}, see {log}"
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    why = f"not reached in {AIM_TIMEOUT_S:.0f} s"
                if os.path.exists(counter + ".killed"):
                    with open(counter + ".killed") as killed:
                        struck.append(killed.read().strip())
                else:
                    struck.append(f"{phase} MISSED ({why})")
        finally:
            stop.set()
            writer.join(60)
        drain_log = os.path.join(work, "drain.log")
        drained = driver(bootstrap, source, sink, output, checkpoint, "drain", from_output=from_output, log=drain_log)
        try:
            code = drained.wait(timeout=DRAIN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(drained.pid, signal.SIGKILL)
            code = f"not done in {DRAIN_TIMEOUT_S:.0f} s"
        if code != 0:
            print(
                f"chaos: sink={sink} kills={kills} the final drain run failed ({code}, see {drain_log}) FAILED",
                flush=True,
            )
            return False
        values = read_output(sink, bootstrap, output)
    counts = Counter(values)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    missing = len(set(acknowledged) - set(counts))
    extra = len(set(counts) - set(acknowledged))
    ok = duplicates == 0 and missing == 0 and extra == 0 and len(acknowledged) > 0
    ok = ok and "NOT-REFUSED" not in new_query and (new_query_at is None or new_query_at >= kills or bool(new_query))
    where = ""
    if aim:
        ok = ok and not any(" MISSED" in s for s in struck)
        where = f"struck=[{'; '.join(struck)}] "
    print(
        f"chaos: sink={sink} kills={kills} seed={seed} input={len(acknowledged)} output={len(values)} "
        f"duplicates={duplicates} missing={missing} unexpected={extra} {new_query}{where}{'OK' if ok else 'FAILED'}",
        flush=True,
    )
    if ok:
        subprocess.run(["rm", "-rf", work], check=False)
    else:
        print(f"chaos: driver logs and the output are kept in {work}", flush=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sink", choices=["files", "files-nokafka", "topic"], default="files")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-seconds", type=float, default=4.0, help="shortest life of a driver before its kill")
    parser.add_argument("--max-seconds", type=float, default=12.0, help="longest life of a driver before its kill")
    parser.add_argument("--bootstrap-server", help="run against this cluster instead of a pylog broker process")
    parser.add_argument(
        "--aim",
        help="comma-separated phases (see scripts/chaos_hooks): the first kills strike "
        "inside them, one each; a driver gets up to 600 s to reach its phase",
    )
    parser.add_argument(
        "--new-query-at",
        type=int,
        help="before this driver (0-based), lose the checkpoint: a new "
        "query from earliest must be refused, later drivers "
        "start from the output (file sinks)",
    )
    args = parser.parse_args()
    aim = args.aim.split(",") if args.aim else None
    unknown = set(aim or ()) - set(_hook_phases())
    if unknown:
        parser.error(f"--aim: unknown phase(s) {sorted(unknown)}; the phases are {', '.join(_hook_phases())}")
    if aim and len(aim) > args.kills:
        parser.error(f"--aim names {len(aim)} phases but --kills is {args.kills}")
    if args.new_query_at is not None and not args.sink.startswith("files"):
        parser.error("--new-query-at needs a file sink")
    return (
        0
        if run(
            args.sink,
            args.kills,
            args.seed,
            args.min_seconds,
            args.max_seconds,
            aim,
            args.bootstrap_server,
            args.new_query_at,
        )
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
