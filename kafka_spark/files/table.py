"""What the output of a ``pylog-files`` sink holds, read from its committed state: where a new
query continues it (:func:`committed_source_offsets`, the pylog source's
``startingOffsetsFromOutput``), and :func:`vacuum`, which removes files no commit references.
"""

from __future__ import annotations

import time

import pyarrow.fs as pafs

from kafka_spark.files.continuity import OutputCoverage
from kafka_spark.files.fs import FileSinkError, list_names, resolve_output
from kafka_spark.files.metadata_log import METADATA_DIR, MetadataLog
from kafka_spark.files.options import SINK_NAME, FileSinkOptionError
from kafka_spark.files.sidecar import SINK_DIR, SinkState
from kafka_spark.files.task import delete_quietly

__all__ = ["committed_source_offsets", "vacuum"]


def committed_source_offsets(path: str) -> dict[str, dict[str, int]] | None:
    """Where the output at ``path`` continues (``{topic: {partition: next_offset}}``): per
    topic-partition, the end offset of the newest committed batch that read it, over every query
    that wrote there; None if no committed batch read Kafka-style offsets.

    This is where a new query must start to continue the output with no duplicate and no gap
    (the pylog source's ``startingOffsetsFromOutput``). Reads only committed state, so it is
    safe while a query writes.
    """
    loc = resolve_output(path)
    latest = MetadataLog(loc.fs, loc.root).check_newest()
    offsets = OutputCoverage.at(SinkState(loc.fs, loc.root), latest).offsets
    return offsets or None


def vacuum(path: str, older_than_seconds: float) -> list[str]:
    """Delete part files (and leftover temp files) that no committed manifest references and
    that are older than ``older_than_seconds``; return the deleted paths.

    Committed files are never touched. The grace period must exceed the longest time a batch
    takes from writing its first file to its commit (Spark's own cleanupDelay is 10 minutes),
    otherwise the files of an in-flight batch could be deleted before its manifest lands.
    """
    if older_than_seconds < 0:
        raise FileSinkOptionError(f"older_than_seconds must be >= 0, got {older_than_seconds}")
    loc = resolve_output(path)
    if SINK_DIR not in list_names(loc.fs, loc.root):
        raise FileSinkError(f"{path} is not an output of the {SINK_NAME} sink (no {SINK_DIR}/); refusing to vacuum")
    log = MetadataLog(loc.fs, loc.root)
    # Read the log before listing: a batch committed in between has young files the grace protects.
    referenced = {loc.from_uri(f.path) for f in log.all_files()}
    cutoff_ns = time.time_ns() - int(older_than_seconds * 1e9)
    doomed = []
    for info in loc.fs.get_file_info(pafs.FileSelector(loc.root, recursive=True)):
        if info.type != pafs.FileType.File or info.mtime_ns is None or info.mtime_ns > cutoff_ns:
            continue
        relative = info.path[len(loc.root) :].lstrip("/")
        name = info.base_name
        in_log_dirs = relative.startswith((METADATA_DIR + "/", SINK_DIR + "/"))
        if in_log_dirs:
            if name.startswith(".") and name.endswith(".tmp"):
                doomed.append(info.path)
        elif name.startswith("part-") and info.path not in referenced:
            doomed.append(info.path)
    return delete_quietly(loc.fs, doomed)
