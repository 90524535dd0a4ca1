"""The pylog source against Spark's own Kafka source on Apache Kafka, and against the ceiling of
Spark's Python data source path, in one run.

Against Spark's JVM source (``--parts kafka``): N messages of 100 bytes in 8 partitions of
Apache Kafka (run from .cache/kafka), read with ``spark.read.format("pylog")`` and with
``spark.read.format("kafka")`` (spark-sql-kafka-0-10 from .cache/spark-kafka, in spark.jars) in
the same Spark session, rounds interleaved; ratio pylog/Spark (target >= 1.0).

Cost as the work grows (``--parts sweep``): the same ``--sweep-rows`` rows spread over 1, 8, 64,
256 and 1,000 partitions of Apache Kafka, each read by both sources. Spark's source makes a task
per partition; pylog plans by work (kafka_spark.planning). Rounds are interleaved across the
partition counts (each round reads every count with pylog, then with Spark's source, the order of
the counts rotating), so JIT warm-up, idle Python workers stopped by Spark and load drift do not
fall on one count. Prints medians of rows/s of both, the ratio, and pylog's rate as a
fraction of the best count of the same round (target >= 0.8 everywhere), with their ranges, and
each count's median as a fraction of the best count's median (less moved by one lucky round).

Throughput: N messages of 100 bytes in 8 partitions of the embedded broker (a separate broker
process, data on disk) read with ``spark.read.format("pylog")``, and the same number of rows from
a synthetic in-memory Python data source yielding the same Arrow columns (8 partitions of
pre-built RecordBatches): rounds interleaved, medians, ratio pylog/synthetic (target >= 0.7).

Latency: a streaming query with a 0-second processing-time trigger; a producer stamps the send
time into each value, foreachBatch notes when the row is visible; p50 and p95 of the difference.

Usage: python bench/source_throughput.py [--messages 4000000] [--rounds 3] [--latency-messages 2000]
           [--sweep-rows 1000000] [--sweep-pylog-only] [--sweep-even] [--parts synthetic,kafka,sweep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from _harness import pylog_broker_process, tree_cpu_seconds  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

PARTITIONS = 8
SPARK_CONSUMER_CACHE = 64  # spark.kafka.consumer.cache.capacity's default
BATCH_ROWS = 10_000


class SyntheticKafka(DataSource):
    """Rows shaped like the pylog source's, from memory: Spark's Python data source ceiling."""

    @classmethod
    def name(cls) -> str:
        return "synthetic_kafka"

    def schema(self) -> str:
        return (
            "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
        )

    def reader(self, schema):  # noqa: ANN001
        return SyntheticReader(int(self.options["rows"]))


class SyntheticReader(DataSourceReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self):  # noqa: ANN201
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition):  # noqa: ANN001, ANN201
        batch = _synthetic_batch(partition.value)
        remaining = self.rows // PARTITIONS
        while remaining > 0:
            n = min(remaining, BATCH_ROWS)
            yield batch if n == BATCH_ROWS else batch.slice(0, n)
            remaining -= n


_BATCHES: dict = {}


def _synthetic_batch(partition: int):  # noqa: ANN202
    import pyarrow as pa

    if partition not in _BATCHES:  # built once per Python worker, then reused: the ceiling
        n = BATCH_ROWS
        _BATCHES[partition] = pa.RecordBatch.from_arrays(
            [
                pa.array([None] * n, pa.binary()),
                pa.array([b"x" * 100] * n, pa.binary()),
                pa.array(["bench"] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32()),
            ],
            names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"],
        )
    return _BATCHES[partition]


def fill(
    bootstrap: str, topic: str, messages: int, partitions: int = PARTITIONS, spread: bool = False, even: bool = False
) -> int:
    """Create ``topic`` and write ``messages`` 100-byte messages: the same number into each
    partition, or (``spread``) in one kcat run that spreads them at random (for many partitions).
    librdkafka's sticky partitioner sends ~10 ms of messages to one partition before it moves on,
    so a spread run fills only some partitions (1,000,000 rows reached ~180 of 1,000); ``even``
    turns stickiness off, every message to a random partition (~1/N of the rows in each).
    Returns the number written."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=60)
    per_run = messages if spread else messages // partitions
    with tempfile.NamedTemporaryFile(suffix=".txt") as data:
        data.write((b"x" * 100 + b"\n") * per_run)
        data.flush()
        for partition in [None] if spread else range(partitions):
            where = [] if partition is None else ["-p", str(partition)]
            with open(data.name, "rb") as stdin:
                sticky = ["-X", "sticky.partitioning.linger.ms=0"] if even else []
                subprocess.run(
                    ["kcat", "-P", "-b", bootstrap, "-t", topic, *where, "-X", "linger.ms=5", *sticky],
                    stdin=stdin,
                    check=True,
                )
    return per_run if spread else per_run * partitions


def timed_count(df) -> float:  # noqa: ANN001
    start = time.perf_counter()
    df.selectExpr("sum(length(value))").collect()
    return time.perf_counter() - start


def latency(spark, bootstrap: str, count: int) -> tuple[float, float]:  # noqa: ANN001
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "latency"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=30)
    samples: list[float] = []

    def record(batch_df, _batch_id) -> None:  # noqa: ANN001
        seen = time.time()
        samples.extend(seen - float(row.value) for row in batch_df.collect())

    query = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("cast(value as string) as value")
        .writeStream.foreachBatch(record)
        .trigger(processingTime="0 seconds")
        .start()
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    time.sleep(3)  # let the query start polling
    for _ in range(count):
        producer.produce(topic, value=repr(time.time()).encode())
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(10)
    deadline = time.monotonic() + 60
    while len(samples) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    if len(samples) < count:
        raise RuntimeError(f"only {len(samples)} of {count} latency samples arrived")
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.95)]


def synthetic_part(spark, args) -> None:  # noqa: ANN001
    spark.dataSource.register(SyntheticKafka)
    with pylog_broker_process(partitions=PARTITIONS) as bootstrap:
        rows = fill(bootstrap, "bench", args.messages)
        pylog = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "bench")
        synthetic = spark.read.format("synthetic_kafka").option("rows", rows)
        rates: dict[str, list[float]] = {"pylog": [], "synthetic": []}
        timed_count(pylog.load())  # warm-up: Python workers, consumer pool, page cache
        timed_count(synthetic.load())
        for _ in range(args.rounds):
            rates["pylog"].append(rows / timed_count(pylog.load()))
            rates["synthetic"].append(rows / timed_count(synthetic.load()))
        p50, p95 = latency(spark, bootstrap, args.latency_messages)
    pylog_rate, synthetic_rate = statistics.median(rates["pylog"]), statistics.median(rates["synthetic"])
    print(
        f"spark.read, {rows:,} rows of 100-byte values in {PARTITIONS} partitions; median of {args.rounds} "
        f"interleaved rounds, local[2]"
    )
    print(
        f"read     pylog {pylog_rate:12,.0f} rows/s   synthetic {synthetic_rate:12,.0f} rows/s   "
        f"ratio pylog/synthetic {pylog_rate / synthetic_rate:5.2f}"
    )
    print(
        f"latency  produce -> visible in a 0-second-trigger streaming sink: p50 {p50 * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms ({args.latency_messages} records)",
        flush=True,
    )


def interleaved(
    spark,
    bootstrap: str,
    topic: str,
    rows: int,
    rounds: int,  # noqa: ANN001
    sources: tuple[str, ...] = ("pylog", "kafka"),
) -> dict[str, list[float]]:
    """rows/s of the sources reading ``topic``, a warm-up each, then ``rounds`` interleaved."""
    readers = {
        fmt: spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        for fmt in sources
    }
    for reader in readers.values():
        timed_count(reader.load())
    rates: dict[str, list[float]] = {fmt: [] for fmt in sources}
    for _ in range(rounds):
        for fmt, reader in readers.items():
            rates[fmt].append(rows / timed_count(reader.load()))
    return rates


def kafka_parts(spark, args, parts: set[str]) -> None:  # noqa: ANN001
    from tests.interop.references import ApacheKafka

    median = statistics.median
    with ApacheKafka(heap="1g") as kafka:
        bootstrap = kafka.bootstrap_servers
        if "kafka" in parts:
            rows = fill(bootstrap, "bench", args.messages)
            rates = interleaved(spark, bootstrap, "bench", rows, args.rounds)
            ratios = [p / k for p, k in zip(rates["pylog"], rates["kafka"], strict=False)]
            print(
                f"spark.read on Apache Kafka, {rows:,} rows of 100-byte values in {PARTITIONS} partitions; "
                f"median of {args.rounds} interleaved rounds, local[2], one session"
            )
            print(
                f"kafka-read pylog {median(rates['pylog']):12,.0f} rows/s   "
                f"spark-kafka {median(rates['kafka']):12,.0f} rows/s   ratio pylog/spark {median(ratios):5.2f}   "
                f"(rounds {min(ratios):.2f} to {max(ratios):.2f})",
                flush=True,
            )
        if "sweep" in parts:
            sweep_part(spark, bootstrap, args)


def sweep_part(spark, bootstrap: str, args) -> None:  # noqa: ANN001
    """The sweep, partition counts interleaved: every topic is filled and warmed up first, then
    each round reads every partition count with both sources, so a JIT still warming up or load
    drifting over the minutes of the run hits every count alike, not the first one measured.
    pylog/best is per round (each count's rate over that round's best)."""
    median = statistics.median
    sources = ("pylog",) if args.sweep_pylog_only else ("pylog", "kafka")
    counts = list(args.sweep_partitions)
    rows, readers = {}, {}
    for partitions in counts:
        topic = f"sweep-{partitions}"
        rows[partitions] = fill(
            bootstrap, topic, args.sweep_rows, partitions, spread=partitions > PARTITIONS, even=args.sweep_even
        )
        readers[partitions] = {
            fmt: spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            for fmt in sources
        }
        for fmt, reader in readers[partitions].items():
            # Warm-up (Python workers, JIT, pylog's connection pool; Spark's cached consumers). Spark
            # caches at most 64 consumers (spark.kafka.consumer.cache.capacity), so on more
            # partitions than that a warm-up read leaves nothing warm and is skipped: minutes saved.
            if fmt == "pylog" or partitions <= SPARK_CONSUMER_CACHE:
                timed_count(reader.load())
        print(
            f"sweep {partitions} partitions: {rows[partitions]:,} rows, pylog plans "
            f"{readers[partitions]['pylog'].load().rdd.getNumPartitions()} tasks",
            flush=True,
        )
    rates = {n: {fmt: [] for fmt in sources} for n in counts}
    cpu = {n: {fmt: [] for fmt in sources} for n in counts}  # CPU microseconds per row, this process tree
    for round_index in range(args.rounds):
        # pylog's reads of a round back to back, then Spark's: Spark stops Python workers idle for
        # a minute, and Spark's source reading 1,000 partitions takes minutes, so a pylog read
        # right after it would pay for starting the workers again (their imports, loading the
        # compiled decoder). One untimed pylog read first restarts them; the order of the counts
        # rotates from round to round.
        turn = round_index % len(counts)
        order = counts[turn:] + counts[:turn]
        timed_count(readers[order[0]]["pylog"].load())
        for fmt in sources:
            for partitions in order:
                before = tree_cpu_seconds()
                rates[partitions][fmt].append(rows[partitions] / timed_count(readers[partitions][fmt].load()))
                cpu[partitions][fmt].append((tree_cpu_seconds() - before) / rows[partitions] * 1e6)
        print(
            f"sweep round {round_index + 1}: "
            + "  ".join(
                f"{n}: pylog {rates[n]['pylog'][-1]:,.0f}"
                + (f" spark {rates[n]['kafka'][-1]:,.0f}" if "kafka" in rates[n] else "")
                for n in counts
            ),
            flush=True,
        )
    best_of_round = [max(rates[n]["pylog"][i] for n in counts) for i in range(args.rounds)]
    best_median = max(median(rates[n]["pylog"]) for n in counts)
    print(
        f"cost as the work grows: {args.sweep_rows:,} rows over {counts[0]} to {counts[-1]} partitions, medians of "
        f"{args.rounds} rounds interleaved across partition counts (pylog plans by work; Spark's source makes a "
        f"task per partition)"
    )
    for partitions in counts:
        pylog = rates[partitions]["pylog"]
        spark_rates = rates[partitions].get("kafka", [])
        ratios = [p / k for p, k in zip(pylog, spark_rates, strict=False)]  # none when Spark's source is skipped
        of_best = [p / b for p, b in zip(pylog, best_of_round, strict=True)]
        spark_rate = median(spark_rates) if spark_rates else float("nan")
        ratio = median(ratios) if ratios else float("nan")
        print(
            f"sweep {partitions:5d} partitions  pylog {median(pylog):12,.0f} rows/s   spark-kafka "
            f"{spark_rate:12,.0f} rows/s   ratio pylog/spark {ratio:5.2f}   pylog/best {median(of_best):4.2f}   "
            f"median/best median {median(pylog) / best_median:4.2f}"
        )
        spread = f"pylog {min(pylog):,.0f}-{max(pylog):,.0f}"
        if spark_rates:
            spread += (
                f"  spark-kafka {min(spark_rates):,.0f}-{max(spark_rates):,.0f}"
                f"  pylog/spark {min(ratios):.2f}-{max(ratios):.2f}"
            )
        used = "  ".join(
            f"{'spark-kafka' if fmt == 'kafka' else fmt} {median(cpu[partitions][fmt]):.2f}" for fmt in sources
        )
        print(
            f"      rounds {spread}  pylog/best {min(of_best):.2f}-{max(of_best):.2f}   CPU us/row "
            f"(Spark, workers, broker) {used}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-messages", type=int, default=2000)
    parser.add_argument("--sweep-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--sweep-partitions", type=lambda text: [int(p) for p in text.split(",")], default=[1, 8, 64, 256, 1000]
    )
    parser.add_argument(
        "--sweep-pylog-only",
        action="store_true",
        help="sweep: time pylog alone (Spark's source costs a task per partition, minutes at 1,000 partitions)",
    )
    parser.add_argument(
        "--sweep-even",
        action="store_true",
        help="sweep: spread the rows evenly over the partitions (without it, librdkafka's sticky partitioner "
        "fills only some of many partitions)",
    )
    parser.add_argument(
        "--parts",
        default="synthetic,kafka,sweep",
        help="which comparisons to run: synthetic, kafka, sweep (comma-separated)",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if parts & {"kafka", "sweep"}:
        from tests.interop.references import spark_kafka_jars

        builder = builder.config("spark.jars", ",".join(spark_kafka_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if "synthetic" in parts:
            synthetic_part(spark, args)
        if parts & {"kafka", "sweep"}:
            kafka_parts(spark, args, parts)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
