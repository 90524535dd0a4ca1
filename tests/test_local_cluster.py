"""pylog on local-cluster[2,1,1024]: two executor JVMs, each with its own Python workers (and so its
own consumer, fetch-connection and producer pools), as on a real cluster. One application, in a
subprocess (a process holds one SparkContext), runs what could differ from ``local[2]``:

* a batch read written with the file sink, both formats found by Spark's auto-registration (the
  pyspark_pylog and pyspark_pylog_files modules), with no register() call;
* batch reads grouped by Kafka's range and round-robin assignors (``maxPartitions``): PySpark's
  data source API has no preferred locations, so a task's place is the scheduler's; each task
  reads exactly the partitions its assignor gave it, wherever it runs;
* streaming queries of three micro-batches of four tasks each into the file sink (tasks' part
  files committed by the driver), the exactly-once topic sink (a transactional id per task
  slot, whichever executor runs it) and the at-least-once topic sink (pooled producers), read
  through the Arrow fetch client and pooled confluent-kafka consumers.

Spark's event log shows each of them ran tasks on both executors. Task retries and speculative
copies are in tests/scripts/test_chaos_executors.py (speculation needs executors on distinct
hosts, which local-cluster cannot give)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from pyarrow.fs import LocalFileSystem

from kafka_spark.files.metadata_log import MetadataLog
from tests.support.spark_events import EVENT_LOG_CONF, task_attempts
from tests.topics.test_sink import read_topic

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

PARTITIONS, PER_PARTITION = 4, 30

APP = textwrap.dedent(
    """
    import json, sys, time
    from pyspark.sql import SparkSession, functions as F

    bootstrap, work, topics = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    builder = (SparkSession.builder.master("local-cluster[2,1,1024]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.eventLog.dir", work + "/events"))
    for key, value in json.loads(sys.argv[4]).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    # Both executors up before the first job, so that its tasks can use both.
    deadline = time.monotonic() + 300
    while len(sc._jsc.sc().statusTracker().getExecutorInfos()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    result = {"app_id": sc.applicationId, "executors": len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1}
    timings, mark = {}, [time.monotonic()]

    def lap(step):
        timings[step] = round(time.monotonic() - mark[0], 1)
        mark[0] = time.monotonic()

    lap("start")

    def source(stream=False, **options):
        reader = (spark.readStream if stream else spark.read).format("pylog")  # no register() call
        reader = reader.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topics["input"])
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    try:
        sc.setJobGroup("batch", "batch read written with the file sink")
        df = source(minPartitions="6").selectExpr("partition", "offset", "cast(value as string) v")
        rows = df.collect()
        df.write.format("pylog-files").mode("append").save(work + "/batch")  # no register() call either
        written = spark.read.parquet(work + "/batch").collect()
        result["batch"] = {
            "partitions": df.rdd.getNumPartitions(),
            "rows": sorted([r.partition, r.offset, r.v] for r in rows),
            "written": sorted([r.partition, r.offset, r.v] for r in written),
        }
        lap("batch")
        for strategy in ("range", "roundrobin"):
            sc.setJobGroup(strategy, "batch read grouped by an assignor")
            grouped = source(maxPartitions="2", assignmentStrategy=strategy)
            tasks = grouped.select(F.spark_partition_id().alias("task"), "partition", "offset").collect()
            result[strategy] = {
                "tasks": sorted({(r.task, r.partition) for r in tasks}),
                "records": len(tasks),
            }
            lap(strategy)

        def stream(name, writer, **options):
            query = writer(source(stream=True, startingOffsets="earliest", maxOffsetsPerTrigger="40",
                                  minPartitions="4", **options)
                           .selectExpr("partition", "offset", "cast(value as string) value"))
            query = query.option("checkpointLocation", work + "/checkpoint-" + name)
            query = query.trigger(availableNow=True).start()
            query.awaitTermination()
            result[name] = {"query_id": query.id, "batches": query.lastProgress["batchId"]}
            lap(name)

        stream("files", lambda df: df.writeStream.format("pylog-files").option("path", work + "/stream"),
               fetcher="arrow")
        result["files"]["written"] = sorted(
            [r.partition, r.offset, r.value] for r in spark.read.parquet(work + "/stream").collect())
        for name, delivery in (("exactly-once", "exactly-once"), ("at-least-once", "at-least-once")):
            stream(name, lambda df, delivery=delivery: df.select("value").writeStream.format("pylog")
                   .option("kafka.bootstrap.servers", bootstrap).option("topic", topics[delivery])
                   .option("deliveryGuarantee", delivery), fetcher="librdkafka")
        result["timings"] = timings
        print("RESULT " + json.dumps(result))
    finally:
        spark.stop()
    """
)


@pytest.fixture(scope="module")
def run(pylog_broker, tmp_path_factory):
    """Runs the application once; (its result, its task attempts from the event log, topics, work dir)."""
    bootstrap = pylog_broker.bootstrap_servers
    work = tmp_path_factory.mktemp("local-cluster")
    (work / "events").mkdir()
    topics = {"input": "local-cluster-in", "exactly-once": "local-cluster-eos", "at-least-once": "local-cluster-alo"}
    pylog_broker.create_topic(topics["input"], partitions=PARTITIONS)
    for name in ("exactly-once", "at-least-once"):
        pylog_broker.create_topic(topics[name], partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topics["input"], key=b"k%d" % i, value=b"v%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", APP, bootstrap, str(work), json.dumps(topics), json.dumps(EVENT_LOG_CONF)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    print("local-cluster application, seconds per step:", result["timings"])
    return result, task_attempts(work / "events", result["app_id"]), topics, work


def expected_rows() -> list[list]:
    return [[p, i, f"v{p}-{i}"] for p in range(PARTITIONS) for i in range(PER_PARTITION)]


def executors_of(attempts, group=None, query_id=None) -> set[str]:
    return {a.executor for a in attempts if a.succeeded and (a.job_group == group or a.query_id == query_id)}


def test_batch_read_and_file_sink_on_two_executor_jvms(run):
    result, attempts, _, _ = run
    assert result["executors"] == 2
    assert result["batch"]["partitions"] == 8  # minPartitions 6 over 4 ranges of 30: each cut in 2, as Spark cuts
    assert result["batch"]["rows"] == expected_rows()
    assert result["batch"]["written"] == result["batch"]["rows"]
    assert executors_of(attempts, group="batch") == {"0", "1"}


@pytest.mark.parametrize(
    "strategy,tasks",
    [
        ("range", [[0, 0], [0, 1], [1, 2], [1, 3]]),  # Kafka's RangeAssignor: neighbours together
        ("roundrobin", [[0, 0], [0, 2], [1, 1], [1, 3]]),  # RoundRobinAssignor: dealt in turn
    ],
)
def test_each_task_reads_what_its_assignor_gave_it_on_either_executor(run, strategy, tasks):
    result, attempts, _, _ = run
    assert result[strategy]["tasks"] == tasks
    assert result[strategy]["records"] == PARTITIONS * PER_PARTITION
    assert executors_of(attempts, group=strategy) == {"0", "1"}


def test_streaming_file_sink_commits_every_executors_part_files(run):
    result, attempts, _, work = run
    files = result["files"]
    assert files["written"] == expected_rows()
    assert files["batches"] == 3  # the empty start batch 0, then 3 batches of 40
    assert executors_of(attempts, query_id=files["query_id"]) == {"0", "1"}
    # Nothing failed, so every part file on disk is one a manifest lists.
    on_disk = {str(p) for p in (work / "stream").rglob("part-*")}
    logged = {f.path.removeprefix("file://") for f in MetadataLog(LocalFileSystem(), str(work / "stream")).all_files()}
    assert on_disk == logged and len(logged) >= 12


def test_exactly_once_topic_sink_keeps_one_transactional_id_per_task_slot(run, pylog_broker):
    result, attempts, topics, _ = run
    query = result["exactly-once"]
    values = sorted(r[1].decode() for r in read_topic(pylog_broker.bootstrap_servers, topics["exactly-once"], 2))
    assert values == sorted(row[2] for row in expected_rows())
    assert executors_of(attempts, query_id=query["query_id"]) == {"0", "1"}
    # Each transactional id's group holds the marker offset of the last batch its task slot
    # committed: one id per task slot, the same in every batch, whichever executor ran it.
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    groups = admin.list_consumer_groups().result(timeout=30).valid
    prefix = f"pylog-sink-{query['query_id']}-p"
    assert sorted(g.group_id for g in groups if g.group_id.startswith(prefix)) == [f"{prefix}{p}" for p in range(4)]


def test_at_least_once_topic_sink_delivers_every_row_from_both_executors(run, pylog_broker):
    result, attempts, topics, _ = run
    rows = read_topic(pylog_broker.bootstrap_servers, topics["at-least-once"], 2)
    assert sorted(r[1].decode() for r in rows) == sorted(row[2] for row in expected_rows())
    assert executors_of(attempts, query_id=result["at-least-once"]["query_id"]) == {"0", "1"}
