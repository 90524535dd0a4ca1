"""Sink throughput, measured side by side in one run.

File-sink half: the same input (N rows: id, a 96-byte binary payload, a timestamp) streamed with
Trigger.AvailableNow into pylog's ``pylog-files`` sink and into Spark's built-in
``writeStream.format("parquet")``, both Parquet/snappy, each after a warm-up run. Prints rows/s of
both and the ratio pylog / Spark (target >= 0.8).

    .venv/bin/python bench/sink_throughput.py [--rows 2000000] [--files 8] [--files-per-batch 2]

Topic-sink half: ``--topic-rows`` rows (100-byte values) written by ``df.write.format("pylog")``
in two Spark tasks (exactly-once: one transaction per task; and at-least-once), against a plain
confluent-kafka producer loop in each of two processes writing the same rows, into a separate
pylog broker process. Prints rows/s and ratios (target >= 0.7 of the plain producer).

Against Spark's own Kafka sink (``--parts kafka``): the same ``--topic-rows`` rows written to
Apache Kafka (run from .cache/kafka) by pylog's exactly-once topic sink (a transaction per task)
and by Spark's built-in, at-least-once ``df.write.format("kafka")`` (spark-sql-kafka-0-10 from
.cache/spark-kafka, in the same session), alternating, after ``--kafka-warmup`` rounds of both
(8: Kafka's broker JVM compiles its transactional produce path over the first rounds). Prints
rows/s, the CPU Kafka's broker spent on a write of each, and the ratio pylog/Spark (target >= 0.8).

    .venv/bin/python bench/sink_throughput.py [--parts files,topic,kafka] [--json PATH]

``--json PATH`` also writes every run's figures as JSON; ``python bench/plot.py PATH`` draws them.

The input is staged once as ``--files`` Parquet files and read by a streaming file source with
``maxFilesPerTrigger``, so both sinks see byte-identical micro-batches (files / files-per-batch of
them, which includes the per-batch commit cost) and the query ends by itself (AvailableNow).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Comparison, Results  # noqa: E402

SCHEMA = "id long, payload binary, ts timestamp"


def stage_input(spark: SparkSession, path: str, rows: int, files: int) -> None:
    (
        spark.range(0, rows, numPartitions=files)
        .select(
            "id",
            F.expr("unhex(concat(sha2(cast(id as string), 512), sha2(cast(id as string), 256)))").alias("payload"),
            F.expr("timestamp_seconds(1767225600 + id)").alias("ts"),
        )
        .write.mode("overwrite")
        .parquet(path)
    )


def stream_once(
    spark: SparkSession, source: str, sink_format: str, out: str, checkpoint: str, files_per_batch: int
) -> float:
    """Seconds to stream everything under ``source`` into ``sink_format`` (AvailableNow)."""
    started = time.perf_counter()
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", files_per_batch)
        .parquet(source)
        .writeStream.format(sink_format)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out)
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{sink_format} query failed: {query.exception()}")
    return time.perf_counter() - started


def bench_file_sink(
    spark: SparkSession, rows: int, files: int, files_per_batch: int, repeats: int, workdir: str
) -> dict[str, list[float]]:
    """rows/s of pylog-files and of Spark's parquet sink on the same staged input, a value a run.

    Runs alternate between the two sinks (the machine is shared, so load drifts) and every run
    checks that all rows arrived.
    """
    source, warm = os.path.join(workdir, "input"), os.path.join(workdir, "warm")
    stage_input(spark, source, rows, files)
    stage_input(spark, warm, 10_000, 2)
    sinks = {"pylog-files": "pylog-files", "spark parquet": "parquet"}
    rates: dict[str, list[float]] = {name: [] for name in sinks}
    for sink_format in sinks.values():  # warm-up: Python workers, JIT, file system caches
        tag = sink_format.replace("-", "_")
        stream_once(spark, warm, sink_format, os.path.join(workdir, f"w_{tag}"), os.path.join(workdir, f"wc_{tag}"), 2)
    for run in range(repeats):
        for name, sink_format in sinks.items():
            tag = f"{sink_format.replace('-', '_')}_{run}"
            out = os.path.join(workdir, f"out_{tag}")
            seconds = stream_once(spark, source, sink_format, out, os.path.join(workdir, f"ck_{tag}"), files_per_batch)
            written = spark.read.parquet(out).count()
            if written != rows:
                raise RuntimeError(f"{name} wrote {written} rows, expected {rows}")
            rates[name].append(rows / seconds)
    return rates


def _plain_producer(bootstrap: str, topic: str, rows: int, worker: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    value = b"x" * 100
    for i in range(rows):
        while True:
            try:
                producer.produce(topic, key=b"%d-%d" % (worker, i), value=value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def bench_topic_sink(spark: SparkSession, rows: int, repeats: int) -> dict[str, list[float]]:
    import multiprocessing

    from confluent_kafka.admin import AdminClient, NewTopic

    sys.path.insert(0, os.path.dirname(__file__))
    from _harness import pylog_broker_process

    results: dict[str, list[float]] = {"plain": [], "exactly-once": [], "at-least-once": []}
    df = (
        spark.range(0, rows, numPartitions=2)
        .selectExpr("cast(id as string) as key", "cast(repeat('x', 100) as binary) as value")
        .cache()
    )
    df.count()
    with pylog_broker_process(partitions=2) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for run in range(repeats + 1):  # the first round warms up and is not counted
            topics = {name: f"bench-{name}-{run}" for name in results}
            for future in admin.create_topics([NewTopic(t, num_partitions=2) for t in topics.values()]).values():
                future.result(timeout=30)
            start = time.perf_counter()
            workers = [
                multiprocessing.Process(target=_plain_producer, args=(bootstrap, topics["plain"], rows // 2, w))
                for w in range(2)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            seconds = {"plain": time.perf_counter() - start}
            for mode in ("exactly-once", "at-least-once"):
                start = time.perf_counter()
                (
                    df.write.format("pylog")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", topics[mode])
                    .option("deliveryGuarantee", mode)
                    .mode("append")
                    .save()
                )
                seconds[mode] = time.perf_counter() - start
            if run:
                for name, took in seconds.items():
                    results[name].append(rows / took)
    df.unpersist()
    return results


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_kafka_sink(spark: SparkSession, rows: int, repeats: int, warmup: int) -> dict[str, list[float]]:
    """rows/s of pylog's exactly-once topic sink and of Spark's Kafka sink, into Apache Kafka,
    after ``warmup`` uncounted rounds of both, and the CPU seconds Kafka's broker spent on each
    write (under ``"<sink> broker cpu"``). Kafka's broker is a JVM that compiles its paths while
    it runs, and the transactional path pylog's sink takes warms up later than the plain one:
    over the first rounds its CPU per write of 1M rows fell from 3.5 to 0.3 s, and in some runs
    it took 8 rounds to get there (Spark's writes: about 0.6 s after 3). The order of the two
    sinks alternates from round to round."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tests.interop.references import ApacheKafka

    df = (
        spark.range(0, rows, numPartitions=2)
        .selectExpr("cast(id as string) as key", "cast(repeat('x', 100) as binary) as value")
        .cache()
    )
    df.count()
    results: dict[str, list[float]] = {"pylog": [], "spark": [], "pylog broker cpu": [], "spark broker cpu": []}
    with ApacheKafka(heap="1g") as kafka:
        bootstrap = kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        check = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
        for run in range(warmup + repeats):
            topics = {name: f"sink-{name}-{run}" for name in ("pylog", "spark")}
            for future in admin.create_topics([NewTopic(t, num_partitions=2) for t in topics.values()]).values():
                future.result(timeout=60)
            order = (("pylog", "pylog"), ("spark", "kafka"))
            for name, fmt in order if run % 2 == 0 else order[::-1]:
                cpu = process_cpu_seconds(kafka.process.pid)
                start = time.perf_counter()
                (
                    df.write.format(fmt)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", topics[name])
                    .mode("append")
                    .save()
                )
                took = time.perf_counter() - start
                cpu = process_cpu_seconds(kafka.process.pid) - cpu
                ends = sum(
                    check.get_watermark_offsets(TopicPartition(topics[name], p), timeout=30)[1] for p in range(2)
                )
                if ends < rows:  # transaction markers take offsets too: at least rows
                    raise RuntimeError(f"{name} wrote {ends} offsets for {rows} rows")
                if run >= warmup:
                    results[name].append(rows / took)
                    results[f"{name} broker cpu"].append(cpu)
        check.close()
    df.unpersist()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=8, help="input files (Spark tasks read one each)")
    parser.add_argument("--files-per-batch", type=int, default=2, help="maxFilesPerTrigger")
    parser.add_argument("--repeats", type=int, default=3, help="runs per sink; the median is reported")
    parser.add_argument("--topic-rows", type=int, default=1_000_000, help="rows for the topic-sink halves")
    parser.add_argument(
        "--kafka-warmup", type=int, default=8, help="uncounted rounds of both sinks before --parts kafka measures"
    )
    parser.add_argument("--parts", default="files,topic,kafka", help="files, topic, kafka (comma-separated)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (bench/plot.py draws them)")
    args = parser.parse_args()
    out = Results("sink_throughput", {key: value for key, value in vars(args).items() if key != "json"})  # load now
    parts = set(args.parts.split(","))
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("pylog-sink-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
    )
    if "kafka" in parts:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from tests.interop.references import spark_kafka_jars

        builder = builder.config("spark.jars", ",".join(spark_kafka_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    workdir = tempfile.mkdtemp(prefix="pylog-sink-bench-")
    results = topic_results = kafka_results = None
    try:
        if "files" in parts:
            results = bench_file_sink(spark, args.rows, args.files, args.files_per_batch, args.repeats, workdir)
        if "topic" in parts:
            topic_results = bench_topic_sink(spark, args.topic_rows, args.repeats)
        if "kafka" in parts:
            kafka_results = bench_kafka_sink(spark, args.topic_rows, args.repeats, args.kafka_warmup)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if results is not None:
        print_file_sink(results, args)
    if topic_results is not None:
        print_topic_sink(topic_results, args)
    if args.json:
        write_json(out, args, results, topic_results, kafka_results)
    if kafka_results is not None:
        ratios = [p / s for p, s in zip(kafka_results["pylog"], kafka_results["spark"], strict=False)]
        print(
            f"topic sinks on Apache Kafka, {args.topic_rows:,} rows x 100-byte values, 2 tasks, "
            f"median of {args.repeats} alternating runs after {args.kafka_warmup} warm-up rounds"
        )
        print(f"  pylog exactly-once        {statistics.median(kafka_results['pylog']):12,.0f} rows/s")
        print(f"  spark format(kafka)       {statistics.median(kafka_results['spark']):12,.0f} rows/s (at-least-once)")
        print(
            f"  Kafka broker CPU a write  pylog {statistics.median(kafka_results['pylog broker cpu']):.2f} s, "
            f"spark {statistics.median(kafka_results['spark broker cpu']):.2f} s"
        )
        print(
            f"  ratio pylog/spark         {statistics.median(ratios):12.2f}  (rounds {min(ratios):.2f} to "
            f"{max(ratios):.2f}; target >= 0.80)"
        )


def write_json(
    out: Results,
    args: argparse.Namespace,
    files: dict[str, list[float]] | None,
    topic: dict[str, list[float]] | None,
    kafka: dict[str, list[float]] | None,
) -> None:
    """Every run's rows/s of each comparison into ``args.json`` (bench/_results.py)."""
    rows, topic_rows = f"{args.rows:,} rows", f"{args.topic_rows:,} rows, 2 tasks"
    pylog_eos = ("pylog, exactly once", "pylog")
    comparisons = (  # id, rates, title, (name, key) of each contender, ratio label
        (
            "sink-kafka",
            kafka,
            f"df.write, {topic_rows}, Apache Kafka 4.3.1",
            pylog_eos,
            ("Spark's Kafka sink, at least once", "spark"),
            "Spark",
        ),
        (
            "sink-topic",
            topic,
            f"df.write, {topic_rows}, pylog's broker",
            (pylog_eos[0], "exactly-once"),
            ("plain producer loop", "plain"),
            "plain",
        ),
        (
            "sink-files",
            files,
            f"writeStream, {rows}, Parquet/snappy",
            ("pylog-files",) * 2,
            ("Spark's parquet sink", "spark parquet"),
            "Spark",
        ),
    )
    for cid, rates, title, ours, theirs, reference in comparisons:
        if rates is not None:
            series = {ours[0]: rates[ours[1]], theirs[0]: rates[theirs[1]]}
            out.add(Comparison.rates(cid, title, series, f"pylog / {reference}", "write"))
    out.write(args.json)
    print(f"results: {args.json}")


def print_file_sink(rates: dict[str, list[float]], args: argparse.Namespace) -> None:
    ours, theirs = statistics.median(rates["pylog-files"]), statistics.median(rates["spark parquet"])
    batches = -(-args.files // args.files_per_batch)
    print(f"file sink, {args.rows:,} rows x 96-byte payload, Parquet/snappy, local[2], {batches} micro-batches")
    print(f"  pylog-files               {ours:12,.0f} rows/s (median of {args.repeats})")
    print(f"  spark writeStream parquet {theirs:12,.0f} rows/s (median of {args.repeats})")
    print(f"  ratio pylog/spark         {ours / theirs:12.2f}  (target >= 0.80)")


def print_topic_sink(rates: dict[str, list[float]], args: argparse.Namespace) -> None:
    topic_results = {name: statistics.median(values) for name, values in rates.items()}
    plain = topic_results["plain"]
    print(f"topic sink, {args.topic_rows:,} rows x 100-byte values, 2 tasks vs 2 producer processes")
    print(f"  plain producer loop       {plain:12,.0f} rows/s (median of {args.repeats})")
    for mode in ("exactly-once", "at-least-once"):
        rate = topic_results[mode]
        print(f"  pylog {mode:19s} {rate:12,.0f} rows/s   ratio pylog/plain {rate / plain:5.2f}  (target >= 0.70)")


if __name__ == "__main__":
    main()
