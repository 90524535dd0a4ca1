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

Latency beside Spark's own source (``--parts latency``): the same measurement with
``format("pylog")`` and ``format("kafka")`` on one broker (Apache Kafka, or pylog's with
``--latency-broker pylog``) in one Spark session, ``--latency-rounds`` runs of each interleaved,
each on a fresh topic; p50, p95 and p99 per run, the ratio pylog/Spark per run.

``--json PATH`` also writes every round's figures as JSON; ``python bench/plot.py PATH`` draws them.

Usage: python bench/source_throughput.py [--messages 4000000] [--rounds 3] [--latency-messages 2000]
           [--sweep-rows 1000000] [--sweep-pylog-only] [--sweep-even] [--parts synthetic,kafka,sweep,latency]
           [--latency-rounds 5] [--latency-warmup 1] [--latency-broker kafka|pylog] [--json PATH]
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
from _results import Comparison, Results  # noqa: E402
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


LATENCY_PERCENTILES = (50, 95, 99)
LATENCY_SOURCES = {"pylog": "pylog", "kafka": "Spark's Kafka source"}


def percentile(ordered: list[float], p: int) -> float:
    """The nearest-rank ``p``th percentile of sorted ``ordered``."""
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def latency(  # noqa: ANN001
    spark, bootstrap: str, count: int, fmt: str = "pylog", topic: str = "latency", batches: list[float] | None = None
) -> list[float]:
    """Produce-to-visible latencies in seconds, sorted: a streaming query of source ``fmt`` with a
    0-second processing-time trigger reads ``topic``; a producer stamps the send time into each of
    ``count`` values (one every 2 ms), and foreachBatch notes when the driver holds the row. A
    warm-up record is produced and seen first, so the query's start is not counted. ``batches``,
    if given, receives the duration in ms of each micro-batch that read measured records (Spark's
    progress, ``triggerExecution``)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=30)
    samples: list[float] = []
    warmed: list[bool] = []
    measured: set[int] = set()  # the micro-batches that read measured records

    def record(batch_df, batch_id) -> None:  # noqa: ANN001
        rows = batch_df.collect()
        seen = time.time()
        for row in rows:
            if row.value == "warm-up":
                warmed.append(True)
            else:
                samples.append(seen - float(row.value))
                measured.add(batch_id)

    query = (
        spark.readStream.format(fmt)
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
    try:
        producer.produce(topic, value=b"warm-up")
        producer.flush(30)
        deadline = time.monotonic() + 120
        while not warmed and time.monotonic() < deadline:
            time.sleep(0.05)
        if not warmed:
            raise RuntimeError(f"the {fmt} query did not show its warm-up record within 120 s")
        for _ in range(count):
            producer.produce(topic, value=repr(time.time()).encode())
            producer.poll(0)
            time.sleep(0.002)  # pacing the records, not waiting for anything
        producer.flush(30)
        deadline = time.monotonic() + 120
        while len(samples) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        if batches is not None:
            # a batch's progress is posted after the batch has handed its rows over: wait for the
            # last measured one's, else a run read in one batch has no duration to show
            deadline = time.monotonic() + 60
            while measured and time.monotonic() < deadline:
                if any(p["batchId"] == max(measured) for p in query.recentProgress):
                    break
                time.sleep(0.05)
            batches.extend(
                float(p["durationMs"]["triggerExecution"]) for p in query.recentProgress if p["batchId"] in measured
            )
    finally:
        query.stop()
    if len(samples) < count:
        raise RuntimeError(f"only {len(samples)} of {count} latency samples arrived from the {fmt} query")
    return sorted(samples)


def latency_part(spark, args, results: Results) -> None:  # noqa: ANN001
    """pylog's source and Spark's own Kafka source side by side: the same broker, the same Spark
    session, runs interleaved (pylog first in odd rounds, Spark's source first in even ones), each
    run on a fresh topic, after ``--latency-warmup`` uncounted runs of both (the session's first
    streaming query pays for starting Python workers and the JIT). Percentiles per run and source,
    the ratio pylog/Spark per run, and each run's median micro-batch duration."""
    from contextlib import ExitStack

    from tests.interop.references import ApacheKafka

    with ExitStack() as stack:
        if args.latency_broker == "kafka":
            bootstrap = stack.enter_context(ApacheKafka(heap="1g")).bootstrap_servers
        else:
            bootstrap = stack.enter_context(pylog_broker_process(partitions=2))
        for warm_up in range(args.latency_warmup):
            for fmt in LATENCY_SOURCES:
                latency(spark, bootstrap, min(args.latency_messages, 200), fmt, f"latency-warm-up-{fmt}-{warm_up}")
        runs: dict[str, list[list[float]]] = {fmt: [[] for _ in LATENCY_PERCENTILES] for fmt in LATENCY_SOURCES}
        batch_ms: dict[str, list[float]] = {fmt: [] for fmt in LATENCY_SOURCES}
        for round_index in range(args.latency_rounds):
            order = list(LATENCY_SOURCES) if round_index % 2 == 0 else list(reversed(LATENCY_SOURCES))
            for fmt in order:
                batches: list[float] = []
                topic = f"latency-{fmt}-{round_index}"
                ordered = latency(spark, bootstrap, args.latency_messages, fmt, topic, batches)
                for i, p in enumerate(LATENCY_PERCENTILES):
                    runs[fmt][i].append(percentile(ordered, p) * 1000)
                batch_ms[fmt].append(statistics.median(batches) if batches else float("nan"))
            print(
                f"latency round {round_index + 1}: "
                + "  ".join(
                    f"{fmt} p50 {runs[fmt][0][-1]:.0f} ms p95 {runs[fmt][1][-1]:.0f} ms "
                    f"(micro-batch {batch_ms[fmt][-1]:.0f} ms)"
                    for fmt in LATENCY_SOURCES
                ),
                flush=True,
            )
    broker = "Apache Kafka 4.3.1" if args.latency_broker == "kafka" else "pylog's broker"
    comparison = results.add(
        Comparison(
            id="source-latency",
            title=f"produce -> visible, 0 s trigger, {broker}",
            unit="ms",
            better="lower",
            groups=[f"p{p}" for p in LATENCY_PERCENTILES],
            series={LATENCY_SOURCES[fmt]: runs[fmt] for fmt in LATENCY_SOURCES},
            ratio_label="pylog / Spark",
            note=f"{args.latency_messages} records a run, one every 2 ms, 2 partitions, local[2], one session",
        )
    )
    batch_comparison = results.add(
        Comparison(
            id="source-latency-batch",
            title=f"micro-batch duration in the latency runs, {broker}",
            unit="ms",
            better="lower",
            groups=["median micro-batch"],
            series={LATENCY_SOURCES[fmt]: [batch_ms[fmt]] for fmt in LATENCY_SOURCES},
            ratio_label="pylog / Spark",
            note="Spark's progress (triggerExecution) of the micro-batches that read measured records",
        )
    )
    print(
        f"latency produce -> visible, {args.latency_messages} records a run, {args.latency_rounds} interleaved runs "
        f"a source, {broker}, one Spark session (medians over the runs; ratio pylog/spark with its range)"
    )
    for line in comparison.summary() + batch_comparison.summary():
        print(line, flush=True)


def synthetic_part(spark, args, results: Results) -> None:  # noqa: ANN001
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
        ordered = latency(spark, bootstrap, args.latency_messages)
        p50, p95 = percentile(ordered, 50), percentile(ordered, 95)
    pylog_rate, synthetic_rate = statistics.median(rates["pylog"]), statistics.median(rates["synthetic"])
    results.add(
        Comparison.rates(
            "source-vs-synthetic",
            f"spark.read, {rows:,} rows in {PARTITIONS} partitions, pylog's broker",
            {"pylog": rates["pylog"], "in-memory Arrow source": rates["synthetic"]},
            "pylog / in-memory",
            "read",
        )
    )
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


def kafka_parts(spark, args, parts: set[str], results: Results) -> None:  # noqa: ANN001
    from tests.interop.references import ApacheKafka

    median = statistics.median
    with ApacheKafka(heap="1g") as kafka:
        bootstrap = kafka.bootstrap_servers
        if "kafka" in parts:
            rows = fill(bootstrap, "bench", args.messages)
            rates = interleaved(spark, bootstrap, "bench", rows, args.rounds)
            ratios = [p / k for p, k in zip(rates["pylog"], rates["kafka"], strict=False)]
            results.add(
                Comparison.rates(
                    "source-read",
                    f"spark.read, {rows:,} rows in {PARTITIONS} partitions, Apache Kafka 4.3.1",
                    {"pylog": rates["pylog"], "Spark's Kafka source": rates["kafka"]},
                    "pylog / Spark",
                    "read",
                )
            )
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
            sweep_part(spark, bootstrap, args, results)


def sweep_part(spark, bootstrap: str, args, results: Results) -> None:  # noqa: ANN001
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
    names = {"pylog": "pylog", "kafka": "Spark's Kafka source"}
    results.add(
        Comparison(
            id="source-partitions",
            title=f"spark.read of {args.sweep_rows:,} rows over more and more partitions, Apache Kafka 4.3.1",
            unit="rows/s",
            better="higher",
            groups=[f"{n:,}" for n in counts],
            series={names[fmt]: [rates[n][fmt] for n in counts] for fmt in sources},
            ratio_label="pylog / Spark",
            log_y=True,
            plot="lines",
            x_label="partitions",
        )
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
        default="synthetic,kafka,sweep,latency",
        help="which comparisons to run: synthetic, kafka, sweep, latency (comma-separated)",
    )
    parser.add_argument(
        "--latency-rounds", type=int, default=5, help="latency: interleaved runs of each source (a fresh topic each)"
    )
    parser.add_argument("--latency-warmup", type=int, default=1, help="latency: uncounted runs of both sources first")
    parser.add_argument(
        "--latency-broker",
        choices=("kafka", "pylog"),
        default="kafka",
        help="latency: the broker both sources read, Apache Kafka (default) or pylog's",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (bench/plot.py draws them)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    unknown = parts - {"synthetic", "kafka", "sweep", "latency"}
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))}; choose from synthetic, kafka, sweep, latency")
    results = Results("source_throughput", {key: value for key, value in vars(args).items() if key != "json"})
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if parts & {"kafka", "sweep", "latency"}:
        from tests.interop.references import spark_kafka_jars

        builder = builder.config("spark.jars", ",".join(spark_kafka_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if "synthetic" in parts:
            synthetic_part(spark, args, results)
        if parts & {"kafka", "sweep"}:
            kafka_parts(spark, args, parts, results)
        if "latency" in parts:
            latency_part(spark, args, results)
    finally:
        spark.stop()
    if args.json:
        results.write(args.json)
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
