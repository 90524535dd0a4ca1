"""The client side of scripts/check_connect.py: pylog's formats through a Spark Connect session.

Runs in a virtualenv holding pylog and the thin client pyspark-client, and no pyspark, against a
Connect server whose Spark has pylog installed (the data sources, and foreachBatch functions, run
in the server's Python). An embedded broker runs in this process; the server's tasks reach it
over loopback. Prints one line per check and exits non-zero at the first that fails.

    python scripts/connect_client.py sc://127.0.0.1:PORT OUTPUT_DIR [--full]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

import kafka_spark
from kafka_spark.broker import EmbeddedBroker

RECORDS = 120  # over 2 partitions, read 60 per trigger: 2 micro-batches after the empty first
PER_TRIGGER = 60
_CHECKPOINTS = ("files-checkpoint", "copied-checkpoint", "counted-checkpoint")


class CheckFailed(SystemExit):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(f"connect_client: FAILED: {message}")


def check_environment() -> str:
    """The thin client and pylog's install, with no full PySpark beside them."""
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    where = Path(kafka_spark.__file__).resolve()
    expect(where.is_relative_to(site), f"kafka_spark was imported from {where}, not from the install in {site}")
    try:
        full = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        full = None
    expect(full is None, f"the full pyspark {full} is installed beside the thin client")
    client = importlib.metadata.version("pyspark-client")
    print(f"client: pyspark-client {client}, no pyspark distribution; pylog {kafka_spark.__version__} in {site}")
    return client


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % (i % 6), value=b"%d" % i, partition=i % 2)
    expect(producer.flush(30) == 0, f"records to {topic} not delivered")


def read_topic(bootstrap: str, topic: str, partitions: int = 2) -> list[tuple[bytes, bytes]]:
    """Every committed record of ``topic`` (read_committed), read to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"connect-check-{topic}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows, at_end = [], set()
    try:
        while len(at_end) < partitions:
            message = consumer.poll(30)
            expect(message is not None, f"no record nor end of {topic} in 30 s")
            if message.error():
                expect(message.error().code() == -191, f"reading {topic}: {message.error()}")  # _PARTITION_EOF
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            rows.append((message.key(), message.value()))
    finally:
        consumer.close()
    return rows


def forget_last_commit(checkpoint: Path) -> int:
    """Spark's commit log loses its last entry, as when the driver dies between writing the sink
    and committing: the query replays that micro-batch. Returns its id."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    expect(bool(commits), f"{checkpoint} has no commit")
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    return int(commits[-1].name)


class Checks:
    def __init__(self, spark: SparkSession, bootstrap: str, out: Path) -> None:
        self.spark, self.bootstrap, self.out = spark, bootstrap, out
        # A server before Spark 4.2 has no admission control for Python sources: it runs
        # Trigger.AvailableNow as one batch, which maxOffsetsPerTrigger would bound (pylog warns),
        # so its users leave the option out there (docs/compatibility.md), as these checks do.
        self.admission_control = tuple(int(n) for n in spark.version.split(".")[:2]) >= (4, 2)
        self.source = {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": "orders",
            "startingOffsets": "earliest",
        }

    def stream(self):
        reader = self.spark.readStream.format("pylog").options(**self.source)
        if self.admission_control:
            reader = reader.option("maxOffsetsPerTrigger", PER_TRIGGER)
        return reader.load()

    def run(self, start: Callable) -> object:
        query = start()
        query.awaitTermination()
        expect(query.exception() is None, f"query failed: {query.exception()}")
        return query

    # -- the short run ---------------------------------------------------------------------

    def batch_read(self, expected: int, how: str = "without register()") -> None:
        rows = self.spark.read.format("pylog").options(**self.source).load()
        per_partition = {r["partition"]: r["count"] for r in rows.groupBy("partition").count().collect()}
        expect(sum(per_partition.values()) == expected, f"batch read {per_partition}, expected {expected} rows")
        print(f"spark.read.format('pylog') {how}: {expected} rows, per partition {per_partition}")

    def files_stream(self, expected: int, *, replay: bool = False) -> object:
        checkpoint, output = self.out / "files-checkpoint", self.out / "files"
        query = self.run(
            lambda: (
                self.stream()
                .select("key", "value", "partition", "offset")
                .writeStream.format("pylog-files")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start(str(output))
            )
        )
        written = self.spark.read.parquet(str(output))
        rows, distinct = written.count(), written.select("partition", "offset").distinct().count()
        expect((rows, distinct) == (expected, expected), f"pylog-files holds {rows} rows, {distinct} distinct")
        sizes = [p.numInputRows for p in query.recentProgress]
        if self.admission_control:
            expect(
                len(sizes) > 1 and max(sizes) <= PER_TRIGGER, f"micro-batches of {sizes} rows, {PER_TRIGGER} a trigger"
            )
        else:  # one batch: what the last run left (a replay first, when one is due)
            expect(sum(sizes) > 0 and len(sizes) <= 1 + replay, f"micro-batches of {sizes} rows, one batch expected")
        print(
            f"readStream.format('pylog') -> writeStream.format('pylog-files'), AvailableNow: {rows} rows "
            f"in micro-batches of {sizes} rows"
            + (" (the first replayed)" if replay else "")
            + ("" if self.admission_control else f" (Spark {self.spark.version}: no maxOffsetsPerTrigger)")
        )
        if replay:  # Spark asks a replayed batch's source for no latest offset: no lag to report
            return query
        first, last = kafka_spark.lag_metrics(query.recentProgress[0]), kafka_spark.lag_metrics(query.lastProgress)
        if self.admission_control:  # else the one batch drained the topic: no lag behind it
            expect(first and int(first["maxOffsetsBehindLatest"]) > 0, f"first batch's lag {first}")
        expect(last.get("maxOffsetsBehindLatest") == "0", f"last batch's lag {last}")
        print(f"lag_metrics(recentProgress[0]): {first}; lag_metrics(lastProgress): {last}")
        return query

    def topic_stream(self, expected: int, topic: str = "copied") -> object:
        return self._into_topic(
            "writeStream.format('pylog') topic sink",
            topic,
            expected,
            lambda writer: (
                writer.format("pylog").option("kafka.bootstrap.servers", self.bootstrap).option("topic", topic)
            ),
        )

    def foreach_batch(self, expected: int, topic: str = "counted") -> object:
        checkpoint = self.out / f"{topic}-checkpoint"
        function = kafka_spark.topic_writer(
            checkpoint_location=str(checkpoint), topic=topic, **{"kafka.bootstrap.servers": self.bootstrap}
        )
        return self._into_topic(
            "foreachBatch(kafka_spark.topic_writer(checkpoint_location=...))",
            topic,
            expected,
            lambda writer: writer.foreachBatch(function),
        )

    def _into_topic(self, what: str, topic: str, expected: int, sink: Callable) -> object:
        """A stream of the source's keys and values into ``topic`` through ``sink(writeStream)``,
        checkpointed in ``<out>/<topic>-checkpoint``; every record must land once."""
        query = self.run(
            lambda: (
                sink(self.stream().select("key", "value").writeStream)
                .option("checkpointLocation", str(self.out / f"{topic}-checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
        )
        rows = read_topic(self.bootstrap, topic)
        expect(len(rows) == expected == len(set(rows)), f"{topic} holds {len(rows)} records, expected {expected}")
        print(f"{what}: {len(rows)} records in {topic!r}, each once")
        return query

    # -- --full ----------------------------------------------------------------------------

    def replays(self, expected: int) -> None:
        """Each sink's last micro-batch replayed after more records arrive: nothing twice."""
        forgotten = {name: forget_last_commit(self.out / name) for name in _CHECKPOINTS}
        print(f"commits removed, micro-batches to replay: {forgotten}")
        # Before Spark 4.2 Trigger.AvailableNow is one batch: a run that owes a replay replays that
        # batch (the outputs keep what they held) and stops; the next run reads the new records.
        replaying = expected if self.admission_control else RECORDS
        queries = {
            _CHECKPOINTS[0]: self.files_stream(replaying, replay=True),
            _CHECKPOINTS[1]: self.topic_stream(replaying),
            _CHECKPOINTS[2]: self.foreach_batch(replaying),
        }
        replayed = {name: query.recentProgress[0].batchId for name, query in queries.items()}
        expect(replayed == forgotten, f"first micro-batches run {replayed}, expected the replays of {forgotten}")
        if not self.admission_control:
            self.files_stream(expected)
            self.topic_stream(expected)
            self.foreach_batch(expected)

    def batch_write(self, expected: int, topic: str = "written") -> None:
        rows = self.spark.read.format("pylog").options(**self.source).load().select("key", "value")
        rows.write.format("pylog").mode("append").option("kafka.bootstrap.servers", self.bootstrap).option(
            "topic", topic
        ).save()
        landed = read_topic(self.bootstrap, topic)
        expect(len(landed) == expected, f"{topic} holds {len(landed)} records, expected {expected}")
        print(f"df.write.format('pylog'): {len(landed)} records in {topic!r}")

    def register_and_listener(self, expected: int) -> None:
        kafka_spark.register(self.spark)  # pickles the data source classes to the server
        self.batch_read(expected, "after kafka_spark.register(spark)")
        listener = kafka_spark.LagListener()
        self.spark.streams.addListener(listener)
        try:
            query = self.run(
                lambda: (
                    self.stream()
                    .writeStream.format("noop")
                    .option("checkpointLocation", str(self.out / "listener-checkpoint"))
                    .trigger(availableNow=True)
                    .start()
                )
            )
            lag = _wait_for(lambda: listener.latest.get(str(query.id)))
        finally:
            self.spark.streams.removeListener(listener)
        expect(lag is not None, f"LagListener saw no progress of query {query.id}: {listener.latest}")
        print(f"LagListener on the client: {lag}")


def _wait_for(probe: Callable, deadline_s: float = 60) -> object:
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    return None


def main(url: str, out: Path, full: bool) -> None:
    check_environment()
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        for topic in ("orders", "copied", "counted", "written"):
            broker.create_topic(topic, partitions=2)
        produce(bootstrap, "orders", 0, RECORDS)
        spark = SparkSession.builder.remote(url).getOrCreate()
        try:
            print(f"server: Spark {spark.version} at {url}")
            checks = Checks(spark, bootstrap, out)

            def produce_more(total: int) -> None:
                produce(bootstrap, "orders", RECORDS, total - RECORDS)
                print(f"{total - RECORDS} more records in orders")

            steps: list[tuple[Callable, int]] = [
                (checks.batch_read, RECORDS),
                (checks.files_stream, RECORDS),
                (checks.topic_stream, RECORDS),
                (checks.foreach_batch, RECORDS),
            ]
            if full:
                steps += [
                    (produce_more, 2 * RECORDS),
                    (checks.replays, 2 * RECORDS),
                    (checks.batch_write, 2 * RECORDS),
                    (checks.register_and_listener, 2 * RECORDS),
                ]
            for check, expected in steps:
                started = time.monotonic()
                check(expected)
                print(f"  ({time.monotonic() - started:.1f} s)", flush=True)
        finally:
            spark.stop()
    print("ok: pylog's formats and helpers through Spark Connect")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the Connect server, sc://HOST:PORT")
    parser.add_argument("out", type=Path, help="a directory for the outputs and checkpoints")
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    main(args.url, args.out.resolve(), args.full)
