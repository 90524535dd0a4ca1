"""Chaos on the executors: streaming pipelines on a Spark cluster whose executors' Python workers
and JVMs are SIGKILLed mid-write, and whose tasks are slow so that Spark runs speculative copies,
while a producer writes sequenced records. Every acknowledged record must reach the output exactly
once: the ``pylog-files`` sink (read back with stock ``spark.read.parquet``) and the
transactional ``pylog`` topic sink (read by a read_committed consumer).

    python scripts/chaos_executors.py --sink files,topic --aim stall,slow,kill-worker,kill-executor \\
        --random-kills 20 --max-failures 8 --seed 1

By default it starts a Spark standalone cluster of its own from the installed PySpark (a master
and two workers of one core on 127.0.0.2 and 127.0.0.3: distinct hosts, which speculation needs,
since Spark never runs a copy of a task on a host that runs an attempt of it) and a pylog broker
process; ``--master`` and ``--bootstrap-server`` use running ones instead (``--master
'local-cluster[2,1,1024]'`` runs the kills where the loopback addresses are missing; not ``stall``
nor ``slow``, whose copies need a second host). This process is the Spark driver. Each sink's
pipeline is pylog source (3 partitions, ``minPartitions`` 2 so that every micro-batch has two
tasks or more, 200 ms trigger) -> sink, with ``spark.speculation`` on:

* ``--aim``: actions struck one at a time, in order, for each sink, by the first attempt of a
  sink task that is in the middle of its write (scripts/executor_hooks, loaded into the
  executors' Python workers): ``stall`` holds it until a speculative copy on the other worker
  wins; ``slow`` makes the task slow on every attempt, so that the first goes on writing after
  its copy started (a topic-sink copy fenced it) and both finish; ``kill-worker`` SIGKILLs its
  Python worker, ``kill-executor`` its executor JVM. The next action waits until the batch
  struck has completed (and, before ``stall`` and ``slow``, until both executors are up).
* ``--random-kills N``: then N SIGKILLs from outside, at random moments 2-8 s apart
  (``--min-seconds``, ``--max-seconds``), of a random Python worker or (one in three) executor
  JVM of the application.

Evidence that the failures happened, not only that the output is right: the hooks record every
sink task attempt with its ``TaskContext.attemptNumber()`` and when attempts reached the middle of
their write, and Spark's event log says how each attempt ended and which were speculative copies.
Each action struck must show its outcome (see :func:`resolved`): a retry that succeeded after a
kill, a speculative copy that won a stall, and for ``slow`` a copy that started before the first
attempt went on, with no failed attempt.

Prints, per sink, ``chaos-executors: sink=... struck=[...] failed=N retried=N speculative=N
input=N output=N duplicates=0 missing=0 unexpected=0 OK`` (FAILED otherwise) and exits 0 when
every sink is OK; ``--report FILE`` writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.support: the standalone cluster and the event log
sys.path.insert(0, str(HERE.parent / "bench"))
from _harness import pylog_broker_process  # noqa: E402

from tests.support.spark_events import EVENT_LOG_CONF, TaskAttempt, task_attempts  # noqa: E402
from tests.support.spark_standalone import StandaloneCluster, executors, python_workers  # noqa: E402

HOOKS = HERE / "executor_hooks"
ACTIONS = ("kill-worker", "kill-executor", "stall", "slow")
INPUT_PARTITIONS = 3
OUTPUT_PARTITIONS = 2
WAIT_S = 600.0  # how long a step may take (a new executor JVM, a batch) on a loaded machine

#: Speculation as on a cluster that must not wait long for a straggler: a task is copied once half
#: of its stage's tasks are done and it has run three times as long as their median, and 5 s at least.
SPECULATION_CONF = {
    "spark.speculation": "true",
    "spark.speculation.interval": "200ms",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.multiplier": "3",
    "spark.speculation.minTaskRuntime": "5s",
    "spark.speculation.efficiency.enabled": "false",
}


class ChaosFailed(RuntimeError):
    """A step did not happen in time; the message says which."""


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise ChaosFailed(f"{what}: not within {timeout:.0f} s")


def produce(bootstrap: str, topic: str, rate: int, stop: threading.Event, acknowledged: list[int]) -> None:
    """Sequence numbers 0, 1, 2, ... dealt over the input's partitions, about ``rate`` a second."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def on_delivery(error: Any, message: Any) -> None:
        if error is None:
            acknowledged.append(int(message.value()))

    seq = 0
    while not stop.is_set():
        for _ in range(max(1, rate // 20)):
            producer.produce(topic, value=b"%d" % seq, partition=seq % INPUT_PARTITIONS, on_delivery=on_delivery)
            seq += 1
        producer.poll(0)
        time.sleep(0.05)
    producer.flush(30)


def create_topics(bootstrap: str, names: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=n) for name, n in names.items()])
    for future in futures.values():
        future.result(timeout=60)


def spark_session(master: str, work: Path, max_failures: int) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    (work / "events").mkdir()
    builder = (
        SparkSession.builder.master(master)
        .appName("pylog-chaos-executors")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executor.memory", "768m")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.task.maxFailures", str(max_failures))
        .config("spark.executorEnv.PYTHONPATH", str(HOOKS))
        .config("spark.executorEnv.PYLOG_EXECUTOR_CHAOS", str(work / "hooks"))
        .config("spark.eventLog.dir", str(work / "events"))
    )
    for key, value in {**EVENT_LOG_CONF, **SPECULATION_CONF}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def live_executors(spark: Any) -> int:
    return len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1  # less the driver


def json_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Pipeline:
    """One sink's streaming query, its input producer and what it wrote."""

    def __init__(self, spark: Any, sink: str, bootstrap: str, work: Path, rate: int) -> None:
        self.spark = spark
        self.sink = sink
        self.bootstrap = bootstrap
        suffix = uuid.uuid4().hex[:8]
        self.source = f"chaos-executors-in-{suffix}"
        self.output = str(work / f"out-{sink}") if sink == "files" else f"chaos-executors-out-{suffix}"
        topics = {self.source: INPUT_PARTITIONS}
        if sink == "topic":
            topics[self.output] = OUTPUT_PARTITIONS
        create_topics(bootstrap, topics)
        self.checkpoint = str(work / f"checkpoint-{sink}")
        self.acknowledged: list[int] = []
        self.stop_producing = threading.Event()
        self.producer = threading.Thread(
            target=produce, args=(bootstrap, self.source, rate, self.stop_producing, self.acknowledged), daemon=True
        )
        self.query: Any = None

    def start(self) -> None:
        from pyspark.sql import functions as F

        self.producer.start()
        rows = (
            self.spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 600)
            .option("minPartitions", 2)  # planned by work, a small batch would be one task: nothing to speculate
            # Both read paths: the Arrow fetch client, and pooled confluent-kafka consumers.
            .option("fetcher", "arrow" if self.sink == "files" else "librdkafka")
            .load()
        )
        seq10 = (F.col("value").cast("string").cast("long") * 10).alias("seq10")
        if self.sink == "files":
            writer = (
                rows.select("partition", "offset", seq10).writeStream.format("pylog-files").option("path", self.output)
            )
        else:
            writer = (
                rows.select(seq10.cast("string").alias("value"))
                .writeStream.format("pylog")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("topic", self.output)
            )
        self.query = (
            writer.option("checkpointLocation", self.checkpoint)
            .trigger(processingTime="200 milliseconds")
            .queryName(f"chaos-executors-{self.sink}")
            .start()
        )

    def completed_batch(self) -> int:
        """The last micro-batch the query completed (-1 before the first); fails if it died."""
        if not self.query.isActive:
            raise ChaosFailed(f"the {self.sink} query stopped: {self.query.exception()}")
        progress = self.query.lastProgress
        return -1 if progress is None else int(progress["batchId"])

    def drain(self) -> None:
        from pyspark.errors import StreamingQueryException

        self.stop_producing.set()
        self.producer.join(60)
        try:
            self.query.processAllAvailable()
        except StreamingQueryException as error:
            raise ChaosFailed(f"the {self.sink} query failed while it drained: {error}") from None
        self.query.stop()

    def read_output(self) -> list[int]:
        """Sequence numbers in the output: stock Spark's parquet reader, or a read_committed consumer."""
        if self.sink == "files":
            return [row.seq10 // 10 for row in self.spark.read.parquet(self.output).select("seq10").collect()]
        from chaos_pipeline import read_output

        return read_output("topic", self.bootstrap, self.output)


def strike(spark: Any, pipeline: Pipeline, hooks: Path, action: str, executors_wanted: int) -> dict[str, Any]:
    """Aim ``action`` at the next first attempt of a sink task mid-write, once ``executors_wanted``
    executors are up; wait for it to strike and for its batch to complete; returns where it struck."""
    wait_until(lambda: live_executors(spark) >= executors_wanted, f"{executors_wanted} executors before {action}")
    before = len(json_lines(hooks / "struck"))
    with open(hooks / "aims", "a") as aims:
        aims.write(action + "\n")

    def struck() -> dict[str, Any] | None:
        pipeline.completed_batch()  # fails at once if the query died
        lines = json_lines(hooks / "struck")
        return lines[before] if len(lines) > before else None

    where = wait_until(struck, f"{action} to strike a {pipeline.sink} task")
    wait_until(lambda: pipeline.completed_batch() > where["batch"], f"batch {where['batch']} after {action}")
    return where


def kill_at_random(spark: Any, rng: random.Random, executors_wanted: int) -> str:
    """SIGKILL a random Python worker or (one time in three, or when none runs) executor JVM of
    this application; returns what was killed."""
    wait_until(lambda: live_executors(spark) >= executors_wanted, "executors back before a random kill")
    app = spark.sparkContext.applicationId
    jvms = executors(app)
    workers = python_workers({p.pid for p in jvms})
    if workers and rng.random() > 1 / 3:
        victim, kind = rng.choice(workers), "python-worker"
    elif jvms:
        victim, kind = rng.choice(jvms), "executor"
    else:
        return "nothing (no executor up)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim.pid, signal.SIGKILL)
    return kind


def resolved(
    where: dict[str, Any],
    spark_attempts: list[TaskAttempt],
    task_side: list[dict[str, Any]],
    phases: list[dict[str, Any]],
) -> str:
    """How the task an action struck ended, from Spark's event log and the hooks' records:

    * ``kill-*``: ``retried`` when attempt 0 failed and a later attempt ran and succeeded;
    * ``stall``: ``speculated`` when attempt 0 did not succeed and a speculative copy did;
    * ``slow`` (every attempt slow): ``fenced-without-failure`` when a speculative copy reached
      the middle of its write (its sink started: a topic-sink copy fenced the first attempt)
      before the first attempt went on, an attempt succeeded and none failed;

    else ``UNRESOLVED (...)`` saying how its attempts ended."""
    key = [where["query"], where["batch"], where["partition"]]
    same = [
        a
        for a in spark_attempts
        if a.query_id == where["query"] and a.batch_id == where["batch"] and a.index == where["partition"]
    ]
    ran_later = any([t["query"], t["batch"], t["partition"]] == key and t["attempt"] > 0 for t in task_side)
    first_won = any(a.attempt == 0 and a.succeeded for a in same)
    later_won = [a for a in same if a.attempt > 0 and a.succeeded]
    failed = [a for a in same if a.reason not in ("Success", "TaskKilled", "TaskCommitDenied")]
    action = where["action"].split()[0]
    if action == "slow":
        resumed = [p["time"] for p in phases if p["task"] == key and p["attempt"] == 0 and p["phase"] == "resumed"]
        copies = [p["time"] for p in phases if p["task"] == key and p["attempt"] > 0 and p["phase"] == "mid-write"]
        fenced_first = bool(resumed and copies and min(copies) < resumed[0])
        ok = fenced_first and any(a.speculative for a in same) and (first_won or bool(later_won)) and not failed
        outcome = "fenced-without-failure"
    elif action == "stall":
        ok = ran_later and not first_won and any(a.speculative for a in later_won)
        outcome = "speculated"
    else:
        ok = ran_later and not first_won and bool(failed) and bool(later_won)
        outcome = "retried"
    if ok:
        return outcome
    attempts = [(a.attempt, "speculative" if a.speculative else "", a.reason) for a in same]
    return f"UNRESOLVED (attempts {attempts}, later attempts ran: {ran_later})"


@dataclass
class SinkRun:
    """What one sink's pipeline went through, and how long each step took."""

    pipeline: Pipeline
    struck: list[dict[str, Any]] = field(default_factory=list)
    random_kills: list[str] = field(default_factory=list)
    values: list[int] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _mark: float = field(default_factory=time.monotonic)

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.timings[step] = round(self.timings.get(step, 0.0) + now - self._mark, 1)
        self._mark = now


def summarize(
    run: SinkRun,
    app_id: str,
    spark_attempts: list[TaskAttempt],
    task_side: list[dict[str, Any]],
    phases: list[dict[str, Any]],
) -> dict[str, Any]:
    pipeline = run.pipeline
    query_id = pipeline.query.id
    mine = [a for a in spark_attempts if a.query_id == query_id]
    counts = Counter(run.values)
    acknowledged = set(pipeline.acknowledged)
    report = {
        "sink": pipeline.sink,
        "app_id": app_id,
        "query_id": query_id,
        "input": len(pipeline.acknowledged),
        "output": len(run.values),
        "duplicates": sum(n - 1 for n in counts.values() if n > 1),
        "missing": len(acknowledged - set(counts)),
        "unexpected": len(set(counts) - acknowledged),
        "struck": [dict(w, outcome=resolved(w, spark_attempts, task_side, phases)) for w in run.struck],
        "random_kills": run.random_kills,
        # Spark's side: attempts that failed (not killed by Spark itself), later attempts that
        # succeeded without being copies (retries), speculative copies launched and won.
        "failed": sum(1 for a in mine if a.reason not in ("Success", "TaskKilled", "TaskCommitDenied")),
        "retried": sum(1 for a in mine if a.attempt > 0 and not a.speculative and a.succeeded),
        "speculative": sum(1 for a in mine if a.speculative),
        "speculative_won": sum(1 for a in mine if a.speculative and a.succeeded),
        "killed_by_spark": sum(1 for a in mine if a.reason == "TaskKilled"),
        "tasks": len(mine),
        "hosts": sorted({a.host for a in mine}),
        # The tasks' side: every attempt a sink task began, and those past the first.
        "task_side_attempts": sum(1 for t in task_side if t["query"] == query_id),
        "task_side_later_attempts": sum(1 for t in task_side if t["query"] == query_id and t["attempt"] > 0),
        "timings": run.timings,
        "seconds": round(sum(run.timings.values()), 1),
        **run.files,
    }
    report["ok"] = (
        report["duplicates"] == 0
        and report["missing"] == 0
        and report["unexpected"] == 0
        and report["input"] > 0
        and not any(s["outcome"].startswith("UNRESOLVED") for s in report["struck"])
        and run.files.get("visible_orphans", 0) == 0
        and run.files.get("left_after_vacuum", 0) == 0
    )
    return report


def file_output_checks(spark: Any, output: str, before: list[int]) -> dict[str, int]:
    """What killed and losing attempts left in the file sink's output: part files no manifest
    lists (never read by stock Spark), removed by vacuum without changing what readers see."""
    from pyarrow.fs import LocalFileSystem

    from kafka_spark.files.metadata_log import MetadataLog
    from kafka_spark.files.table import vacuum

    def part_files() -> set[str]:
        return {str(p) for p in Path(output).rglob("part-*")}

    def logged() -> set[str]:
        return {f.path.removeprefix("file://") for f in MetadataLog(LocalFileSystem(), output).all_files()}

    orphans = part_files() - logged()
    removed = vacuum(output, older_than_seconds=0)
    after = [row.seq10 // 10 for row in spark.read.parquet(output).select("seq10").collect()]
    return {
        "orphans": len(orphans),
        "vacuumed": len(removed),
        "visible_orphans": int(sorted(after) != sorted(before)),
        "left_after_vacuum": len(part_files() - logged()),
    }


def run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    (work / "hooks").mkdir()
    runs: list[SinkRun] = []
    with contextlib.ExitStack() as stack:
        master = args.master
        if master is None:
            master = stack.enter_context(StandaloneCluster(work / "cluster")).master_url
        bootstrap = args.bootstrap_server or stack.enter_context(pylog_broker_process(partitions=INPUT_PARTITIONS))
        spark = spark_session(master, work, args.max_failures)
        try:
            app_id = spark.sparkContext.applicationId
            for sink in args.sink:
                pipeline = Pipeline(spark, sink, bootstrap, work, args.rate)
                run = SinkRun(pipeline)
                runs.append(run)
                pipeline.start()
                wait_until(lambda p=pipeline: p.completed_batch() >= 1, f"the {sink} query's first batches")
                if not json_lines(work / "hooks" / "attempts"):
                    raise ChaosFailed(f"the executors' Python workers did not load {HOOKS / 'sitecustomize.py'}")
                run.lap("start")
                for action in args.aim:
                    # A speculative copy needs a second host; a retry only a live executor.
                    wanted = args.executors if action.split()[0] in ("stall", "slow") else 1
                    run.struck.append(strike(spark, pipeline, work / "hooks", action, wanted))
                    run.lap(action)
                for _ in range(args.random_kills):
                    time.sleep(rng.uniform(args.min_seconds, args.max_seconds))
                    pipeline.completed_batch()
                    run.random_kills.append(kill_at_random(spark, rng, args.executors))
                run.lap("random-kills")
                pipeline.drain()
                run.lap("drain")
                run.values = pipeline.read_output()
                if sink == "files":
                    run.files = file_output_checks(spark, pipeline.output, run.values)
                run.lap("check")
        finally:
            spark.stop()  # writes the end of the event log
    spark_attempts = task_attempts(work / "events", app_id)
    task_side = json_lines(work / "hooks" / "attempts")
    phases = json_lines(work / "hooks" / "phases")
    return [summarize(run, app_id, spark_attempts, task_side, phases) for run in runs]


def summary_line(report: dict[str, Any]) -> str:
    struck = "; ".join(
        f"{s['action']} batch {s['batch']} task {s['partition']} on {s['host']}: {s['outcome']}"
        for s in report["struck"]
    )
    files = f"orphans={report['orphans']} vacuumed={report['vacuumed']} " if report["sink"] == "files" else ""
    timings = ",".join(f"{step}:{seconds}" for step, seconds in report["timings"].items())
    return (
        f"chaos-executors: sink={report['sink']} struck=[{struck}] random-kills={len(report['random_kills'])} "
        f"failed={report['failed']} retried={report['retried']} speculative={report['speculative']} "
        f"input={report['input']} output={report['output']} duplicates={report['duplicates']} "
        f"missing={report['missing']} unexpected={report['unexpected']} {files}"
        f"seconds={report['seconds']} ({timings}) {'OK' if report['ok'] else 'FAILED'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sink", default="files,topic", help="files, topic or files,topic (run one after the other)")
    parser.add_argument(
        "--aim",
        default="stall,slow,kill-worker,kill-executor",
        help=f"actions among {', '.join(ACTIONS)}; stall and slow take seconds ('slow 40')",
    )
    parser.add_argument("--random-kills", type=int, default=0)
    parser.add_argument("--min-seconds", type=float, default=2.0, help="shortest time between random kills")
    parser.add_argument("--max-seconds", type=float, default=8.0, help="longest time between random kills")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--max-failures",
        type=int,
        default=4,
        help="spark.task.maxFailures (default Spark's 4; random kills may hit one task more often)",
    )
    parser.add_argument("--rate", type=int, default=200, help="records produced a second (default 200)")
    parser.add_argument("--master", help="a running cluster's master URL (default: start a standalone cluster)")
    parser.add_argument("--executors", type=int, default=2, help="executors the application runs on (default 2)")
    parser.add_argument("--bootstrap-server", help="run against this Kafka cluster instead of a pylog broker process")
    parser.add_argument("--report", help="write the figures of every sink to this file as JSON")
    args = parser.parse_args(argv)
    args.sink = args.sink.split(",")
    args.aim = [a for a in args.aim.split(",") if a]
    if set(args.sink) - {"files", "topic"}:
        parser.error(
            f"--sink: unknown sink(s) {sorted(set(args.sink) - {'files', 'topic'})}; the sinks are files, topic"
        )
    unknown = sorted({a.split()[0] for a in args.aim} - set(ACTIONS))
    if unknown:
        parser.error(f"--aim: unknown action(s) {unknown}; the actions are {', '.join(ACTIONS)}")
    work = Path(tempfile.mkdtemp(prefix="pylog-chaos-executors-"))
    try:
        reports = run(args, work)
    except ChaosFailed as error:
        print(f"chaos-executors: {error}; the logs are kept in {work} FAILED", flush=True)
        return 1
    for report in reports:
        print(summary_line(report), flush=True)
    if args.report:
        Path(args.report).write_text(json.dumps(reports, indent=1))
    if not all(r["ok"] for r in reports):
        print(f"chaos-executors: the event log, hook records and outputs are kept in {work}", flush=True)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
