"""Driver side of the file sink: publishing a batch (the commit point) and aborting one.

Runs in Spark's Python commit worker, a separate process on the driver: everything it needs is
read from the output directory and Spark's checkpoint, never from memory. The protocol and the
kill-safety argument are in :mod:`kafka_spark.file_sink`.
"""

from __future__ import annotations

import time
from typing import Optional

from pyspark.sql.datasource import WriterCommitMessage

from kafka_spark.metadata_log import MetadataLog
from kafka_spark.sink_fs import FileSinkError, resolve_output
from kafka_spark.sink_offsets import (
    Checkpoint,
    CheckpointError,
    CommitRecord,
    KafkaOffsets,
    SinkState,
    continuity_error,
    find_discontinuities,
    merge_kafka_offsets,
)
from kafka_spark.sink_options import FileSinkOptions
from kafka_spark.sink_task import FileSinkCommitMessage, delete_quietly


class FileSinkCommitError(FileSinkError):
    """A batch cannot be committed (nothing of it became visible)."""


class ConcurrentWriterError(FileSinkCommitError):
    """Another writer published the manifest id this commit wanted."""


def task_messages(messages: list[Optional[WriterCommitMessage]]) -> list[FileSinkCommitMessage]:
    return [m for m in messages if isinstance(m, FileSinkCommitMessage)]


def abort_files(options: FileSinkOptions, messages: list[Optional[WriterCommitMessage]]) -> None:
    """Delete the files of the attempt's successful tasks (failed tasks deleted their own)."""
    loc = resolve_output(options.path)
    log = MetadataLog(loc.fs, loc.root)
    committed = {f.path for f in log.all_files()}
    doomed = [loc.from_uri(f.path) for m in task_messages(messages) for f in m.files if f.path not in committed]
    delete_quietly(loc.fs, doomed)


class StreamCommit:
    """The driver side of one micro-batch commit (see the module docstring)."""

    def __init__(self, options: FileSinkOptions, messages: list[Optional[WriterCommitMessage]], batch_id: int):
        self.options = options
        self.messages = task_messages(messages)
        self.batch_id = batch_id
        self.loc = resolve_output(options.path)
        self.log = MetadataLog(self.loc.fs, self.loc.root)
        self.state = SinkState(self.loc.fs, self.loc.root)
        assert options.checkpoint_location is not None
        ck = resolve_output(options.checkpoint_location, option="checkpointLocation")
        self.checkpoint = Checkpoint(ck.fs, ck.root, options.checkpoint_location)
        self.files = [f for m in self.messages for f in m.files]

    def _discard(self) -> None:
        delete_quietly(self.loc.fs, [self.loc.from_uri(f.path) for f in self.files])

    def run(self) -> None:
        query_id = self.checkpoint.query_id()
        strangers = {m.query_id for m in self.messages} - {query_id}
        if strangers:
            self._discard()
            raise FileSinkCommitError(
                f"tasks of batch {self.batch_id} ran for query {strangers.pop()}, but "
                f"checkpointLocation {self.options.checkpoint_location} belongs to query {query_id}"
            )
        latest = self.log.latest_id()
        prior = self.state.last_commit_of(query_id, latest)
        if prior is not None and prior.batch_id is not None and prior.batch_id >= self.batch_id:
            # Replay of a committed batch: keep the committed files, drop whatever the replay wrote.
            committed = {f.path for f in self.log.all_files(latest)}
            delete_quietly(self.loc.fs, [self.loc.from_uri(f.path) for f in self.files if f.path not in committed])
            return
        if prior is not None and prior.batch_id is not None and self.batch_id != prior.batch_id + 1:
            self._discard()
            raise FileSinkCommitError(
                f"query {query_id} committed batch {prior.batch_id} to {self.options.path} last, but "
                f"Spark now commits batch {self.batch_id}: batches {prior.batch_id + 1}..{self.batch_id - 1} "
                "are missing from the output (was _spark_metadata edited, or the checkpoint replaced?)"
            )
        sources = self.checkpoint.source_offsets(self.batch_id)
        if sources is None:
            self._discard()
            raise CheckpointError(
                f"{self.options.checkpoint_location}/offsets/{self.batch_id} does not exist; the "
                "checkpointLocation option must be the query's own checkpoint directory"
            )
        end = merge_kafka_offsets(sources)
        if end is not None and latest is not None:
            self._check_continuity(query_id, latest, end)
        manifest_id = 0 if latest is None else latest + 1
        self.state.register_query(query_id, self.options.checkpoint_location or "", manifest_id)
        record = CommitRecord(
            manifest_id, query_id, self.batch_id, sources, end, len(self.files), int(time.time() * 1000)
        )
        self.state.write_record(record)
        if not self.log.add(manifest_id, self.files):  # the commit point
            self._discard()
            raise ConcurrentWriterError(
                f"{self.log.file_for(manifest_id)} appeared while batch {self.batch_id} of query "
                f"{query_id} committed: another query writes to {self.options.path} at the same time. "
                "Nothing of this batch was committed; run one query per output path."
            )

    def _check_continuity(self, query_id: str, latest: int, end: KafkaOffsets) -> None:
        committed = newest_offsets_record(self.state, latest)
        if committed is None or committed.offsets is None:
            return
        exact_start = None
        if self.batch_id > 0:
            previous = self.checkpoint.source_offsets(self.batch_id - 1)
            exact_start = merge_kafka_offsets(previous) if previous is not None else None
        observed: KafkaOffsets | None = None
        if exact_start is None and any(m.first_offsets is not None for m in self.messages):
            observed = {}
            for m in self.messages:
                for topic, parts in (m.first_offsets or {}).items():
                    for partition, low in parts.items():
                        mine = observed.setdefault(topic, {})
                        mine[partition] = min(low, mine.get(partition, low))
        problems = find_discontinuities(committed.offsets, exact_start, end, observed)
        if not self.options.fail_on_data_loss:
            problems = [p for p in problems if p.kind != "gap"]
        if problems:
            self._discard()
            raise continuity_error(problems, committed.offsets, self.options.path, self.batch_id, query_id)


def newest_offsets_record(state: SinkState, latest: int | None) -> CommitRecord | None:
    """The newest committed record that carries Kafka-style offsets (None if there is none)."""
    if latest is None:
        return None
    for manifest_id in range(latest, -1, -1):
        record = state.read_record(manifest_id)
        if record.offsets is not None:
            return record
    return None


def commit_batch_job(options: FileSinkOptions, messages: list[Optional[WriterCommitMessage]]) -> None:
    """Publish a batch (``df.write``) job as the next manifest; its record has no query id."""
    loc = resolve_output(options.path)
    log = MetadataLog(loc.fs, loc.root)
    files = [f for m in task_messages(messages) for f in m.files]
    latest = log.latest_id()
    manifest_id = 0 if latest is None else latest + 1
    record = CommitRecord(manifest_id, None, None, [], None, len(files), int(time.time() * 1000))
    SinkState(loc.fs, loc.root).write_record(record)
    if not log.add(manifest_id, files):  # the commit point
        delete_quietly(loc.fs, [loc.from_uri(f.path) for f in files])
        raise ConcurrentWriterError(
            f"{log.file_for(manifest_id)} appeared while this job committed: another writer is "
            f"using {options.path}; this job's files were removed, nothing was appended"
        )
