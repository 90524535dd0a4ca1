"""Driver side of the file sink: publishing a batch (the commit point) and aborting one.

Runs in Spark's Python commit worker, a separate process on the driver: everything it needs is
read from the output directory and Spark's checkpoint, never from memory. The protocol and the
kill-safety argument are in :mod:`kafka_spark.files.writers`.
"""

from __future__ import annotations

import time

from pyspark.sql.datasource import WriterCommitMessage

from kafka_spark.files.continuity import ContinuityCheck, OutputCoverage, batch_start
from kafka_spark.files.fs import FileSinkError, resolve_output
from kafka_spark.files.metadata_log import MetadataLog
from kafka_spark.files.options import FileSinkOptions
from kafka_spark.files.sidecar import (
    Checkpoint,
    CheckpointError,
    CommitRecord,
    SinkState,
    merge_kafka_offsets,
)
from kafka_spark.files.task import FileSinkCommitMessage, delete_quietly


class FileSinkCommitError(FileSinkError):
    """A batch cannot be committed (nothing of it became visible)."""


class ConcurrentWriterError(FileSinkCommitError):
    """Another writer published the manifest id this commit wanted."""


def task_messages(messages: list[WriterCommitMessage | None]) -> list[FileSinkCommitMessage]:
    return [m for m in messages if isinstance(m, FileSinkCommitMessage)]


def abort_files(options: FileSinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    """Delete the files of the attempt's successful tasks (failed tasks deleted their own)."""
    loc = resolve_output(options.path)
    log = MetadataLog(loc.fs, loc.root)
    committed = {f.path for f in log.all_files()}
    doomed = [loc.from_uri(f.path) for m in task_messages(messages) for f in m.files if f.path not in committed]
    delete_quietly(loc.fs, doomed)


class StreamCommit:
    """The driver side of one micro-batch commit (see the module docstring)."""

    def __init__(self, options: FileSinkOptions, messages: list[WriterCommitMessage | None], batch_id: int):
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
        try:
            latest = self.log.check_newest()  # never build on a log Spark readers cannot read
            prior = self.state.last_commit_of(query_id, latest)
        except FileSinkError:
            self._discard()
            raise
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
        try:
            coverage = OutputCoverage.at(self.state, latest)
            wrote_rows = any(m.rows > 0 or m.files for m in self.messages)
            check = ContinuityCheck(
                self.options.path, query_id, self.batch_id, sources, end or {}, self.options.fail_on_data_loss
            )
            check.verify(coverage, batch_start(self.checkpoint, self.batch_id, sources, wrote_rows))
        except FileSinkError:
            self._discard()
            raise
        manifest_id = 0 if latest is None else latest + 1
        self.state.register_query(query_id, self.options.checkpoint_location or "", manifest_id)
        after = coverage.after(query_id, sources, end)
        record = CommitRecord(
            manifest_id,
            query_id,
            self.batch_id,
            sources,
            end,
            len(self.files),
            int(time.time() * 1000),
            after.offsets,
            after.other_source_queries,
        )
        self.state.write_record(record)
        try:
            published = self.log.add(manifest_id, self.files)  # the commit point
        except FileSinkError:  # a compaction input that does not parse: nothing was published
            self._discard()
            raise
        if not published:
            self._discard()
            raise ConcurrentWriterError(
                f"{self.log.file_for(manifest_id)} appeared while batch {self.batch_id} of query "
                f"{query_id} committed: another query writes to {self.options.path} at the same time. "
                "Nothing of this batch was committed; run one query per output path."
            )


def commit_batch_job(options: FileSinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    """Publish a batch (``df.write``) job as the next manifest; its record has no query id."""
    loc = resolve_output(options.path)
    log = MetadataLog(loc.fs, loc.root)
    state = SinkState(loc.fs, loc.root)
    files = [f for m in task_messages(messages) for f in m.files]
    try:
        latest = log.check_newest()
        coverage = OutputCoverage.at(state, latest)
    except FileSinkError:
        delete_quietly(loc.fs, [loc.from_uri(f.path) for f in files])
        raise
    manifest_id = 0 if latest is None else latest + 1
    record = CommitRecord(
        manifest_id,
        None,
        None,
        [],
        None,
        len(files),
        int(time.time() * 1000),
        coverage.offsets,
        coverage.other_source_queries,
    )
    state.write_record(record)
    try:
        published = log.add(manifest_id, files)  # the commit point
    except FileSinkError:
        delete_quietly(loc.fs, [loc.from_uri(f.path) for f in files])
        raise
    if not published:
        delete_quietly(loc.fs, [loc.from_uri(f.path) for f in files])
        raise ConcurrentWriterError(
            f"{log.file_for(manifest_id)} appeared while this job committed: another writer is "
            f"using {options.path}; this job's files were removed, nothing was appended"
        )
