"""Executor side of the file sink: one task writes its part files and reports them.

A task writes its rows (Arrow batches) into part files named
``[col=val/]part-<partitionId %05d>-<label>-<uuid>.<ext>`` (label = Spark batch id, or ``batch`` for
batch jobs); names are unique per attempt, so nothing is ever overwritten. It stats each file after
closing it (size, mtime in ms) for the manifest entry. If the task fails, it deletes what it wrote;
files a killed task leaves behind are never logged and :func:`kafka_spark.files.table.vacuum` removes
them.

Thread-safety: a :class:`TaskWrite` belongs to one task.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.datasource import WriterCommitMessage

from kafka_spark.files import formats as sink_formats
from kafka_spark.files.fs import OutputLocation, resolve_output
from kafka_spark.files.metadata_log import SinkFileStatus
from kafka_spark.files.options import FileSinkOptions

_log = logging.getLogger(__name__)


@dataclass
class FileSinkCommitMessage(WriterCommitMessage):
    """What one task wrote (or that it skipped a replay)."""

    query_id: str | None
    batch_id: int | None
    partition_id: int
    attempt: int
    files: list[SinkFileStatus] = field(default_factory=list)
    skipped: bool = False
    rows: int = 0


def task_context() -> tuple[int, int, object]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # only outside Spark, e.g. when called by hand
        return 0, 0, None
    return context.partitionId(), context.attemptNumber(), context


_HIVE_ESCAPE = set("\"#%'*/:=?\\\x7f{[]^")


def _partition_dir(column: str, value: object) -> str:
    """``col=value`` as Spark names partition directories (Hive escaping, null default)."""
    if value is None:
        text = "__HIVE_DEFAULT_PARTITION__"
    else:
        raw = str(value).lower() if isinstance(value, bool) else str(value)
        text = "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPE or ord(ch) < 0x20 else ch for ch in raw)
    return f"{column}={text}"


class TaskWrite:
    """Writes one task's part files; deletes them all if the task fails."""

    def __init__(self, options: FileSinkOptions, label: str) -> None:
        self.options = options
        self.loc: OutputLocation = resolve_output(options.path)
        self.label = label
        self.partition_id, self.attempt, _ = task_context()
        self.files: list[SinkFileStatus] = []
        self.rows = 0
        self._pending: str | None = None  # the file being written, deleted if the task fails

    def _new_path(self, subdir: str | None) -> str:
        name = (
            f"part-{self.partition_id:05d}-{self.label}-{uuid.uuid4()}."
            f"{sink_formats.EXTENSIONS[self.options.file_format]}"
        )
        return self.loc.join(subdir, name) if subdir else self.loc.join(name)

    def _write_file(self, batches: Iterator[pa.RecordBatch], subdir: str | None) -> None:
        path = self._new_path(subdir)
        if subdir:
            self.loc.fs.create_dir(self.loc.join(subdir), recursive=True)
        self._pending = path
        with self.loc.fs.open_output_stream(path) as stream:
            self.rows += sink_formats.write_part(stream, batches, self.options.file_format, self.options.compression)
        info = self.loc.fs.get_file_info(path)
        self.files.append(
            SinkFileStatus(path=self.loc.to_uri(path), size=info.size, modification_time=info.mtime_ns // 1_000_000)
        )
        self._pending = None

    def run(self, batches: Iterator[pa.RecordBatch]) -> None:
        try:
            if self.options.partition_by:
                self._write_partitioned(batches)
                return
            first = next(batches, None)
            if first is None:
                return  # an empty task writes no file (and a manifest entry for none)

            def chained() -> Iterator[pa.RecordBatch]:
                yield first
                yield from batches

            self._write_file(chained(), None)
        except BaseException:
            self.delete_written()
            raise

    def _write_partitioned(self, batches: Iterator[pa.RecordBatch]) -> None:
        collected = list(batches)
        if not collected:
            return
        table = pa.Table.from_batches(collected)
        keys = list(self.options.partition_by)
        indexed = table.append_column("__pylog_row", pa.array(range(table.num_rows), pa.int64()))
        groups = indexed.group_by(keys, use_threads=False).aggregate([("__pylog_row", "list")])
        data = table.drop_columns(keys)
        for i in range(groups.num_rows):
            subdir = "/".join(_partition_dir(k, groups[k][i].as_py()) for k in keys)
            rows = data.take(groups["__pylog_row_list"][i].values)
            self._write_file(iter(rows.to_batches()), subdir)

    def delete_written(self) -> None:
        paths = [self.loc.from_uri(f.path) for f in self.files]
        if self._pending is not None:
            paths.append(self._pending)
        delete_quietly(self.loc.fs, paths)
        self.files = []


def delete_quietly(fs: pafs.FileSystem, paths: list[str]) -> list[str]:
    """Best-effort delete (cleanup only: a leftover file is invisible and vacuum catches it)."""
    deleted = []
    for path in paths:
        try:
            fs.delete_file(path)
            deleted.append(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            _log.warning("could not delete %s: %s", path, exc)
    return deleted
