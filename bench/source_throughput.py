"""The pylog source against the ceiling of Spark's Python data source path, in one run.

Throughput: N messages of 100 bytes in 8 partitions of the embedded broker (a separate broker
process, data on disk) read with ``spark.read.format("pylog")``, and the same number of rows from
a synthetic in-memory Python data source yielding the same Arrow columns (8 partitions of
pre-built RecordBatches): rounds interleaved, medians, ratio pylog/synthetic (target >= 0.7).

Latency: a streaming query with a 0-second processing-time trigger; a producer stamps the send
time into each value, foreachBatch notes when the row is visible; p50 and p95 of the difference.

Usage: python bench/source_throughput.py [--messages 4000000] [--rounds 3] [--latency-messages 2000]
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
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from _harness import pylog_broker_process  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

PARTITIONS = 8
BATCH_ROWS = 10_000


class SyntheticKafka(DataSource):
    """Rows shaped like the pylog source's, from memory: Spark's Python data source ceiling."""

    @classmethod
    def name(cls) -> str:
        return "synthetic_kafka"

    def schema(self) -> str:
        return ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")

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
        _BATCHES[partition] = pa.RecordBatch.from_arrays([
            pa.array([None] * n, pa.binary()),
            pa.array([b"x" * 100] * n, pa.binary()),
            pa.array(["bench"] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
            pa.array([0] * n, pa.int32()),
        ], names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])
    return _BATCHES[partition]


def fill(bootstrap: str, topic: str, messages: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    with tempfile.NamedTemporaryFile(suffix=".txt") as data:
        data.write((b"x" * 100 + b"\n") * (messages // PARTITIONS))
        data.flush()
        for partition in range(PARTITIONS):
            with open(data.name, "rb") as stdin:
                subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition),
                                "-X", "linger.ms=5"], stdin=stdin, check=True)


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

    query = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .selectExpr("cast(value as string) as value")
             .writeStream.foreachBatch(record).trigger(processingTime="0 seconds").start())
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-messages", type=int, default=2000)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    with pylog_broker_process(partitions=PARTITIONS) as bootstrap:
        fill(bootstrap, "bench", args.messages)
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(SyntheticKafka)
        pylog = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", "bench"))
        synthetic = spark.read.format("synthetic_kafka").option("rows", args.messages)
        rows = args.messages // PARTITIONS * PARTITIONS
        rates: dict[str, list[float]] = {"pylog": [], "synthetic": []}
        timed_count(pylog.load())  # warm-up: Python workers, consumer pool, page cache
        timed_count(synthetic.load())
        for _ in range(args.rounds):
            rates["pylog"].append(rows / timed_count(pylog.load()))
            rates["synthetic"].append(rows / timed_count(synthetic.load()))
        p50, p95 = latency(spark, bootstrap, args.latency_messages)
        spark.stop()
    pylog_rate, synthetic_rate = statistics.median(rates["pylog"]), statistics.median(rates["synthetic"])
    print(f"spark.read, {rows:,} rows of 100-byte values in {PARTITIONS} partitions; median of {args.rounds} "
          f"interleaved rounds, local[2]")
    print(f"read     pylog {pylog_rate:12,.0f} rows/s   synthetic {synthetic_rate:12,.0f} rows/s   "
          f"ratio pylog/synthetic {pylog_rate / synthetic_rate:5.2f}")
    print(f"latency  produce -> visible in a 0-second-trigger streaming sink: p50 {p50 * 1000:.0f} ms, "
          f"p95 {p95 * 1000:.0f} ms ({args.latency_messages} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
