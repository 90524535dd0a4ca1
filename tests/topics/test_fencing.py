"""An exactly-once topic-sink task fenced in the middle of its write by a newer attempt of the same
task, which took its transactional id: a speculative copy (spark.speculation), or a retry while
the first attempt lived on. Both attempts run here as Spark runs them, write_exactly_once with
the same write id, batch and partition, outside Spark (kafka_spark.topics.task is the code a task
runs); the first is held after its first rows, inside its open transaction, while the second
fences it. The fenced attempt must neither write a row nor fail the task while the newer one
commits the batch: a failure would count against spark.task.maxFailures for a straggler that
Spark would otherwise just have killed. tests/scripts/test_chaos_executors.py runs the same on a
cluster, with a task slow on every attempt."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_spark.topics.options import parse_sink_options
from kafka_spark.topics.task import TopicSinkCommitMessage, TopicSinkDeliveryError, write_exactly_once
from tests.topics.test_sink import read_topic

SCHEMA = StructType([StructField("value", BinaryType())])


def rows(prefix: str, count: int) -> pa.RecordBatch:
    return pa.record_batch({"value": pa.array([b"%s%d" % (prefix.encode(), i) for i in range(count)], pa.binary())})


class HeldAttempt:
    """An attempt writing batch ``batch_id`` in a thread, held after its first rows until
    :meth:`release`; :attr:`outcome` is its commit message or the exception it raised."""

    def __init__(self, options, write_id: str, batch_id: int) -> None:
        self.first_rows_taken = threading.Event()
        self.released = threading.Event()
        self.outcome: object = None
        self.thread = threading.Thread(target=self._run, args=(options, write_id, batch_id), daemon=True)
        self.thread.start()
        assert self.first_rows_taken.wait(60), "the held attempt did not start writing"

    def _batches(self):
        yield rows("first-", 5)
        self.first_rows_taken.set()  # its sink produced them inside its open transaction
        assert self.released.wait(60)
        yield rows("first-late-", 5)

    def _run(self, options, write_id: str, batch_id: int) -> None:
        try:
            self.outcome = write_exactly_once(options, self._batches(), write_id, batch_id)
        except Exception as error:  # noqa: BLE001 - the outcome under test
            self.outcome = error.with_traceback(None)  # not its frames: their producer would outlive the test

    def release(self) -> object:
        self.released.set()
        self.thread.join(120)
        assert not self.thread.is_alive()
        return self.outcome


def test_an_attempt_fenced_mid_write_returns_as_a_replay_once_the_newer_attempt_committed(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=1)
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic}, SCHEMA)
    first = HeldAttempt(options, "fenced-query", 3)
    copy = write_exactly_once(options, iter([rows("copy-", 10)]), "fenced-query", 3)
    assert copy == TopicSinkCommitMessage(0, 10, skipped=False)
    assert first.release() == TopicSinkCommitMessage(0, 0, skipped=True)
    values = sorted(r[1] for r in read_topic(bootstrap, topic, 1))
    assert values == sorted(b"copy-%d" % i for i in range(10)), "the copy's rows once, none of the first attempt's"


def test_an_attempt_fenced_by_one_that_never_commits_fails_after_the_transaction_timeout(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=1)
    options = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "transactionTimeoutMs": "2000"}, SCHEMA
    )
    first = HeldAttempt(options, "abandoned-query", 0)
    # A newer holder of the task's transactional id that dies before it writes anything.
    newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "pylog-sink-abandoned-query-p0"})
    newer.init_transactions(30)
    outcome = first.release()
    del newer  # its librdkafka threads end with it, not after the broker stopped
    assert isinstance(outcome, TopicSinkDeliveryError)
    with pytest.raises(TopicSinkDeliveryError, match="fenced by a newer attempt of its task, which did not commit"):
        raise outcome
    assert read_topic(bootstrap, topic, 1) == []
