"""SIGKILL of a whole replicated cluster under load: ``pylog cluster start --brokers 3`` runs in its
own process (three brokers and their controller), a topic of 3 partitions with replication factor
3 and min.insync.replicas 2 takes an idempotent acks=all producer's records, and two streaming
queries read it throughout, one writing pylog-files and one pylog's exactly-once topic sink. The
cluster's process is SIGKILLed ``--kills`` times (no shutdown of any kind: every broker, the
controller and the coordinators die at once, mid-request) and started again on its log directory.

At the end every acknowledged record must be in the files exactly once (read back by Spark's own
Parquet reader) and in the sink's topic exactly once (a read_committed consumer), and neither
query may have needed a restart. scripts/cluster_chaos.py kills one broker at a time inside one
process; this one kills the operating-system process, as ``kill -9`` does.

    python scripts/cluster_sigkill.py [--kills 10] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster_chaos import OUTPUT, TOPIC, produce_until, read_committed, start_copy  # noqa: E402


def start_cluster(log_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """``pylog cluster start`` on ``log_dir``; the process and its bootstrap servers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kafka_spark.cli", "cluster", "start", "--brokers", "3", "--log-dir", str(log_dir)]
        + ["--min-insync-replicas", "2", "--replication-factor", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("bootstrap.servers="):
        process.kill()
        raise RuntimeError(f"pylog cluster start printed {line!r}, not its bootstrap servers")
    return process, line.strip().partition("=")[2]


def start_files(bootstrap: str, work: Path):  # noqa: ANN201 - pyspark is imported lazily
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    return (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("kafka.default.api.timeout.ms", "4000")
        .load()
        .select("value")
        .writeStream.format("pylog-files")
        .option("checkpointLocation", str(work / "files-checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start(str(work / "files"))
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    chance = random.Random(seed)
    print(f"seed {seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="pylog-cluster-sigkill-") as data:
        work = Path(data)
        env = {**os.environ, "PYLOG_HOME": str(work / "home")}  # its registration stays here
        process, bootstrap = start_cluster(work / "cluster", env)
        running = [process]  # the cluster's current process: run() replaces it at every restart
        try:
            return run(args, chance, work, env, running, bootstrap)
        finally:
            if running[0].poll() is None:
                running[0].send_signal(signal.SIGTERM)
                running[0].wait(60)


def run(args, chance, work: Path, env, running: list[subprocess.Popen], bootstrap: str) -> int:  # noqa: ANN001
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for name in (TOPIC, OUTPUT):
        topic = confluent_kafka.admin.NewTopic(name, 3, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[name].result(60)
    cluster = type("Cluster", (), {"bootstrap_servers": bootstrap})()  # what start_copy and read_committed use
    copy = start_copy(cluster, str(work))
    files = start_files(bootstrap, work)
    acked: list[bytes] = []
    failed: list = []
    stop = threading.Event()

    def produce() -> None:  # the cluster is down for seconds at a time: deliveries wait out the kills
        settings = {"message.timeout.ms": 300_000}
        produce_until(stop, bootstrap, b"sigkill", lambda message: acked.append(message.value()), failed, **settings)

    started = time.monotonic()
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    for query in (copy, files):
        while (query.lastProgress or {}).get("batchId", -1) < 1:  # kills hit running queries
            if time.monotonic() > started + 300 or not query.isActive:
                raise RuntimeError(f"a streaming query did not start: {query.exception()}")
            time.sleep(0.2)
    for kill in range(args.kills):
        time.sleep(chance.uniform(1.0, 3.0))
        running[0].send_signal(signal.SIGKILL)
        running[0].wait(60)
        down = chance.uniform(0.2, 2.5)
        time.sleep(down)
        running[0], again = start_cluster(work / "cluster", env)
        assert again == bootstrap, f"the cluster came back on {again}, not {bootstrap}"
        print(f"kill {kill + 1}: SIGKILL, down {down:.1f} s; {len(acked)} acknowledged so far", flush=True)
    stop.set()
    producer.join(600)
    wanted = set(acked)
    print(f"acknowledged {len(acked)}  failed {len(failed)}", flush=True)
    ok = not failed and len(wanted) == len(acked)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    deadline = time.monotonic() + 600
    copied: list[bytes] = []
    written: list[bytes] = []
    while time.monotonic() < deadline and copy.isActive and files.isActive:
        copied = read_committed(cluster, OUTPUT, 3)
        # Spark's own Parquet reader: it lists the committed files from the sink's _spark_metadata.
        written = [bytes(row.value) for row in spark.read.parquet(str(work / "files")).collect()]
        if wanted <= set(copied) and wanted <= set(written):
            break
        time.sleep(2)
    for name, query, got in (("topic sink", copy, copied), ("pylog-files", files, written)):
        error = query.exception()
        batches = (query.lastProgress or {}).get("batchId", -1) + 1
        query.stop()
        lost, doubled, foreign = wanted - set(got), len(got) - len(set(got)), set(got) - wanted
        print(
            f"{name}: {len(got)} records  lost {len(lost)}  duplicates {doubled}  not acknowledged {len(foreign)}  "
            f"batches {batches}  query error {error}",
            flush=True,
        )
        ok = ok and not lost and not doubled and error is None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
