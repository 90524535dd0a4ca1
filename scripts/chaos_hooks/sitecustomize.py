"""Aimed kills for scripts/chaos_pipeline.py --aim: loaded into every Python process of a chaos
driver (the driver script and Spark's Python workers) through PYTHONPATH, never by the package.

At the phase named by ``PYLOG_CHAOS_AIM`` of the sinks' commit protocols, the ``PYLOG_CHAOS_AT``-th
time any process of this driver reaches it (counted in the file ``PYLOG_CHAOS_COUNTER``), the hook
records the phase in ``<counter>.killed`` and SIGKILLs the driver's whole process group (JVM,
driver and workers), exactly as a crash at that instant would.

Phases (see kafka_spark/sink.py for the two protocols side by side):
  files-written        file sink: tasks wrote the batch's part files; the commit has not started
  sidecar-written      file sink: _sink/offsets/M written, manifest M not published
  manifest-published   file sink: manifest M published (the commit point), Spark's commits/N not written
  transaction-open     topic sink: a task produced its rows in a transaction that is not committed
  transaction-committed  topic sink: a task's transaction committed, Spark's commits/N not written
  batch-planned        source: Spark wrote offsets/N and asks for its partitions; nothing read yet
                       (for batch 0 of a new query: its start batch)
  spark-committed      source: Spark wrote commits/N and plans batch N+1 (offsets/N+1 not written)
"""

import fcntl
import os
import signal

PHASES = (
    "files-written",
    "sidecar-written",
    "manifest-published",
    "transaction-open",
    "transaction-committed",
    "batch-planned",
    "spark-committed",
)
_AIM = os.environ.get("PYLOG_CHAOS_AIM")
_COUNTER = os.environ.get("PYLOG_CHAOS_COUNTER")


def _reached(phase: str, detail: str) -> None:
    if phase != _AIM or not _COUNTER:
        return
    with open(_COUNTER, "a+") as counter:  # processes of one driver share the count
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        count = len(counter.read().splitlines()) + 1
        counter.write(f"{phase} {detail}\n")
        counter.flush()
    if count == int(os.environ.get("PYLOG_CHAOS_AT", "1")):
        with open(_COUNTER + ".killed", "w") as killed:
            killed.write(f"{phase} {detail}\n")
        os.killpg(os.getpgrp(), signal.SIGKILL)


def _install() -> None:
    if _AIM not in PHASES:
        return
    from kafka_spark.files import commit as sink_commit
    from kafka_spark.files.metadata_log import MetadataLog
    from kafka_spark.files.sidecar import SinkState
    from kafka_spark.read.stream import PylogStreamReader
    from kafka_spark.topics import task as topic_sink

    run = sink_commit.StreamCommit.run

    def commit_run(self):  # noqa: ANN001, ANN202
        _reached("files-written", f"batch {self.batch_id}")
        return run(self)

    write_record = SinkState.write_record

    def sidecar(self, record):  # noqa: ANN001, ANN202
        result = write_record(self, record)
        _reached("sidecar-written", f"manifest {record.manifest_id}")
        return result

    add = MetadataLog.add

    def publish(self, manifest_id, files):  # noqa: ANN001, ANN202
        published = add(self, manifest_id, files)
        if published:
            _reached("manifest-published", f"manifest {manifest_id}")
        return published

    produce_all = topic_sink._produce_all

    def produced(producer, records, errors, *rest):  # noqa: ANN001, ANN002, ANN202
        count = produce_all(producer, records, errors, *rest)
        _reached("transaction-open", f"{count} rows")
        return count

    write_exactly_once = topic_sink.write_exactly_once

    def committed(options, batches, write_id, batch_id):  # noqa: ANN001, ANN202
        message = write_exactly_once(options, batches, write_id, batch_id)
        if not message.skipped:
            _reached("transaction-committed", f"batch {batch_id}")
        return message

    partitions = PylogStreamReader.partitions

    def planned(self, start, end):  # noqa: ANN001, ANN202
        _reached("batch-planned", f"end {end}")
        return partitions(self, start, end)

    latest_offset = PylogStreamReader.latestOffset

    def next_batch(self, start, limit):  # noqa: ANN001, ANN202
        if self._planned:  # not the first call of this run: Spark committed the previous batch
            _reached("spark-committed", f"start {start}")
        return latest_offset(self, start, limit)

    PylogStreamReader.partitions = planned
    PylogStreamReader.latestOffset = next_batch
    sink_commit.StreamCommit.run = commit_run
    SinkState.write_record = sidecar
    MetadataLog.add = publish
    topic_sink._produce_all = produced
    topic_sink.write_exactly_once = committed


_install()
