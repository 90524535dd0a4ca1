"""The topic sink's rows, every shape an output can have, written by a task outside Spark
(kafka_spark.topics.task: the same code a Spark task runs) and read back with a consumer:
one topic or a topic column, keys absent, null or strings, values as strings or bytes, partitions
given for some rows, headers on some rows, timestamps, nulls in each. Both of the write loop's
paths are covered: the common shape's (one topic, nothing else per row) and the general one."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_spark.topics import task
from kafka_spark.topics.options import TopicSinkError, parse_sink_options
from kafka_spark.topics.task import QueueFull, TopicSinkDeliveryError, write_at_least_once, write_exactly_once
from tests.topics.test_sink import read_topic


@pytest.fixture(autouse=True)
def _no_producer_left_pooled():
    """At-least-once writes keep their producer in this process's pool, as a Python worker does
    between tasks: each test's go when it ends."""
    yield
    task._PRODUCERS.close_all()


HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SPARK_TYPES = {
    "key": {pa.binary(): BinaryType(), pa.string(): StringType()},
    "value": {pa.binary(): BinaryType(), pa.string(): StringType()},
    "topic": {pa.string(): StringType()},
    "partition": {pa.int32(): IntegerType()},
    "headers": {HEADERS: ArrayType(HEADER)},
    "timestamp": {pa.timestamp("us", tz="UTC"): TimestampType()},
}


def _sink(bootstrap: str, batch: pa.RecordBatch, **options: str):
    schema = StructType([StructField(f.name, SPARK_TYPES[f.name][f.type]) for f in batch.schema])
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, **options}, schema)


def _batches(columns: dict[str, pa.Array], rows_per_batch: int = 7) -> list[pa.RecordBatch]:
    whole = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
    return [whole.slice(start, rows_per_batch) for start in range(0, whole.num_rows, rows_per_batch)]


N = 20


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
@pytest.mark.parametrize(
    "shape",
    [
        "binary values only",
        "string keys and values, some null",
        "topic column, partitions for some rows",
        "headers and timestamps for some rows",
    ],
)
def test_every_row_lands_as_written_whatever_the_columns(pylog_broker, pylog_topic, shape, guarantee):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=3)
    options = {} if shape == "topic column, partitions for some rows" else {"topic": topic}
    columns: dict[str, pa.Array] = {"value": pa.array([b"v%d" % i for i in range(N)], pa.binary())}
    expected = [(None, b"v%d" % i, None, None, None) for i in range(N)]  # key, value, headers, ts, partition
    if shape == "string keys and values, some null":
        keys = [None if i % 4 == 0 else f"k{i}" for i in range(N)]
        values = [None if i % 5 == 0 else f"vä{i}" for i in range(N)]
        columns = {"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.string())}
        expected = [
            (None if k is None else k.encode(), None if v is None else v.encode(), None, None, None)
            for k, v in zip(keys, values, strict=True)
        ]
    elif shape == "topic column, partitions for some rows":
        partitions = [i % 3 if i % 2 else None for i in range(N)]
        columns["topic"] = pa.array([topic] * N, pa.string())
        columns["partition"] = pa.array(partitions, pa.int32())
        expected = [(None, b"v%d" % i, None, None, partitions[i]) for i in range(N)]
    elif shape == "headers and timestamps for some rows":
        headers = [[{"key": "h", "value": b"%d" % i}] if i % 3 == 0 else None for i in range(N)]
        stamps = [1_700_000_000_000_000 + i * 1000 if i % 2 else None for i in range(N)]
        columns["headers"] = pa.array(headers, HEADERS)
        columns["timestamp"] = pa.array(stamps, pa.timestamp("us", tz="UTC"))
        expected = [
            (
                None,
                b"v%d" % i,
                [("h", b"%d" % i)] if i % 3 == 0 else None,
                1_700_000_000_000 + i if i % 2 else None,
                None,
            )
            for i in range(N)
        ]
    batches = _batches(columns)
    sink = _sink(bootstrap, batches[0], **options)
    if guarantee == "exactly-once":
        message = write_exactly_once(sink, iter(batches), write_id=f"rows-{topic}", batch_id=0)
    else:
        message = write_at_least_once(sink, iter(batches))
    assert message.rows == N and not message.skipped
    got = read_topic(bootstrap, topic, 3)
    assert len(got) == N
    by_value = {}
    for key, value, headers, timestamp, partition in got:
        by_value.setdefault(value, []).append((key, headers, timestamp, partition))
    for key, value, headers, timestamp, partition in expected:
        (landed,) = [entry for entry in by_value[value] if entry[0] == key and entry[1] == headers]
        by_value[value].remove(landed)
        if timestamp is not None:
            assert landed[2] == timestamp
        if partition is not None:
            assert landed[3] == partition


def test_a_null_topic_without_the_topic_option_fails_naming_it(pylog_broker, pylog_topic):
    topic = pylog_topic()
    columns = {"topic": pa.array([topic, None], pa.string()), "value": pa.array([b"a", b"b"], pa.binary())}
    (batch,) = _batches(columns)
    with pytest.raises(TopicSinkError, match="null 'topic' and no 'topic' option"):
        write_at_least_once(_sink(pylog_broker.bootstrap_servers, batch), iter([batch]))


@pytest.mark.parametrize("general", [False, True])
def test_a_queue_that_stays_full_fails_after_max_block_ms_naming_the_topic(general):
    # Nothing listens there: the producer's queue (room for 5 records) never empties.
    columns = {"value": pa.array([b"x"] * 50, pa.binary())}
    if general:  # a partition column takes the general path
        columns["partition"] = pa.array([0] * 50, pa.int32())
    (batch,) = _batches(columns, rows_per_batch=50)
    sink = _sink(
        "127.0.0.1:9",
        batch,
        topic="full",
        **{"kafka.queue.buffering.max.messages": "5", "kafka.max.block.ms": "300"},
    )
    with pytest.raises(QueueFull, match=r"kafka.max.block.ms=300 ms while writing to full"):
        write_at_least_once(sink, iter([batch]))


def test_the_transaction_marker_waits_for_room_when_the_rows_left_the_queue_full(pylog_broker, pylog_topic):
    # Room for one record and 100 ms of linger: the last row still sits in the queue when the
    # task produces its marker record, which must wait for room as the rows do.
    topic = pylog_topic()
    (batch,) = _batches({"value": pa.array([b"r%d" % i for i in range(8)], pa.binary())}, rows_per_batch=8)
    sink = _sink(
        pylog_broker.bootstrap_servers,
        batch,
        topic=topic,
        **{"kafka.queue.buffering.max.messages": "1", "kafka.linger.ms": "100"},
    )
    message = write_exactly_once(sink, iter([batch]), write_id=f"full-{topic}", batch_id=0)
    assert message.rows == 8 and not message.skipped
    assert sorted(value for _, value, *_ in read_topic(pylog_broker.bootstrap_servers, topic, 1)) == sorted(
        b"r%d" % i for i in range(8)
    )


@pytest.mark.parametrize("loop", ["common shape", "general (partition and headers columns)"])
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_rows_the_broker_rejects_fail_the_task_naming_why_and_commit_nothing(
    pylog_broker, pylog_topic, guarantee, loop
):
    # The topic takes batches of at most 1,000 bytes; the 3,000-byte rows are rejected by the
    # broker (MESSAGE_TOO_LARGE), after the producer accepted them, while the small rows land.
    # Exactly-once rows carry no delivery callback (the transaction's commit is where a failed
    # row shows), so this proves the commit is refused and the task fails all the same.
    topic = pylog_topic(config={"max.message.bytes": "1000"})
    values = [b"x" * 3000 if i % 5 == 0 else b"small%d" % i for i in range(20)]
    columns = {"value": pa.array(values, pa.binary())}
    if loop != "common shape":
        columns["partition"] = pa.array([0] * len(values), pa.int32())
        columns["headers"] = pa.array([[{"key": "h", "value": b"%d" % i}] for i in range(len(values))], HEADERS)
    batches = _batches(columns)
    sink = _sink(pylog_broker.bootstrap_servers, batches[0], topic=topic, **{"kafka.linger.ms": "0"})
    with pytest.raises(TopicSinkDeliveryError, match="(?i)too large"):
        if guarantee == "exactly-once":
            write_exactly_once(sink, iter(batches), write_id=f"rejected-{topic}", batch_id=0)
        else:
            write_at_least_once(sink, iter(batches))
    landed = read_topic(pylog_broker.bootstrap_servers, topic, 1)
    if guarantee == "exactly-once":
        assert landed == []  # the transaction was aborted: read_committed sees none of it
    else:
        assert not any(len(value) == 3000 for _, value, *_ in landed)
