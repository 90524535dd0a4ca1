"""The offsets sidecar ``<out>/_sink/``: which query committed each manifest, covering which offsets.

Layout (JSON, UTF-8; credentials and Spark confs are never copied in):

``_sink/offsets/<manifestId>``
    ``{"manifestId": M, "queryId": q | null, "batchId": N | null, "sources": [<raw offset json> |
    null, ...], "offsets": {"topic": {"0": next_offset}} | null, "files": k, "committedMs": t}``.
    Written (replace allowed) just *before* ``_spark_metadata/<M>`` is published; it counts only
    if that manifest exists. ``sources`` are the source lines of Spark's
    ``<checkpoint>/offsets/<N>`` (end offsets of batch N, one per source); ``offsets`` is their
    merge when they are Kafka-style (``{"topic": {"partition": next_offset}}``), as Spark's Kafka
    source and pylog's source write them. Batch (non-streaming) jobs have ``queryId`` null.
``_sink/queries/<queryId>``
    ``{"queryId", "checkpointLocation", "firstManifestId", "createdMs"}``, created once (create-if-
    absent) before the query's first manifest. Its absence proves the query never committed, and
    ``firstManifestId`` bounds the scan in :meth:`SinkState.last_commit_of`.

Manifest ids are the sink's own counter, independent of Spark batch ids (the "variant" of the
design note): a new query (new or lost checkpoint) appends manifest ``L + 1`` even though its
Spark batch id restarts at 0, so it neither collides with nor skips the old batches. Whether a
(queryId, batchId) was already committed is answered by the sidecars, never by the batch id.

Offsets JSON is Spark's: topics and partitions sorted, compact, offset = next offset to read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from kafka_spark.sink_fs import FileSinkError, create_if_absent, read_text, write_replace

SINK_DIR = "_sink"
KafkaOffsets = dict[str, dict[str, int]]


class CheckpointError(FileSinkError):
    """Spark's checkpoint does not hold what the sink needs (metadata or offsets/<N>)."""


class OffsetContinuityError(FileSinkError):
    """A new query would duplicate or skip records relative to what the output already holds."""


def offsets_json(offsets: KafkaOffsets) -> str:
    """Spark's Kafka offset JSON: ``{"t":{"0":23,"1":-1}}``, topics and partitions sorted."""
    ordered = {
        topic: {p: offsets[topic][p] for p in sorted(offsets[topic], key=int)} for topic in sorted(offsets)
    }
    return json.dumps(ordered, separators=(",", ":"))


def _as_kafka_offsets(value: Any) -> KafkaOffsets | None:
    if not isinstance(value, dict) or not value:
        return None
    result: KafkaOffsets = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict) or not all(str(p).lstrip("-").isdigit() for p in parts):
            return None
        if not all(isinstance(o, int) and not isinstance(o, bool) for o in parts.values()):
            return None
        result[str(topic)] = {str(p): int(o) for p, o in parts.items()}
    return result


def merge_kafka_offsets(sources: list[str | None]) -> KafkaOffsets | None:
    """Merge the Kafka-style source offsets of one batch; None if no source is Kafka-style."""
    merged: KafkaOffsets = {}
    for raw in sources:
        if raw is None:
            continue
        try:
            parsed = _as_kafka_offsets(json.loads(raw))
        except json.JSONDecodeError:
            continue
        if parsed is None:
            continue
        for topic, parts in parsed.items():
            if topic in merged:
                raise CheckpointError(
                    f"two sources of the query read topic {topic!r}; the file sink can store one "
                    "offset per topic-partition"
                )
            merged[topic] = parts
    return merged or None


class Checkpoint:
    """Read-only view of Spark's checkpoint directory (``checkpointLocation``)."""

    def __init__(self, fs: pafs.FileSystem, root: str, location: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.location = location

    def query_id(self) -> str:
        text = read_text(self.fs, f"{self.root}/metadata")
        if text is None:
            raise CheckpointError(
                f"{self.location}/metadata does not exist: checkpointLocation must be the "
                "directory Spark uses for this query"
            )
        return str(json.loads(text.splitlines()[0])["id"])

    def source_offsets(self, batch_id: int) -> list[str | None] | None:
        """The source lines of ``offsets/<batch_id>`` (None per absent source), or None if the
        file does not exist. Accepts Spark's v1 lines (``<json>``) and v2 (``<id>:<json>``)."""
        text = read_text(self.fs, f"{self.root}/offsets/{batch_id}")
        if text is None:
            return None
        lines = text.split("\n")
        if not lines[0].startswith("v"):
            raise CheckpointError(f"{self.location}/offsets/{batch_id}: unknown format {lines[0]!r}")
        sources: list[str | None] = []
        for line in lines[2:]:  # line 1 is OffsetSeqMetadata (watermark, timestamp, confs)
            line = line.strip()
            if not line or line == "-":
                sources.append(None)
                continue
            if lines[0] != "v1" and not line.startswith("{") and ":" in line:
                line = line.split(":", 1)[1]
            sources.append(line)
        return sources


@dataclass(frozen=True)
class CommitRecord:
    """One ``_sink/offsets/<manifestId>`` file."""

    manifest_id: int
    query_id: str | None
    batch_id: int | None
    sources: list[str | None]
    offsets: KafkaOffsets | None
    files: int
    committed_ms: int

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "manifestId": self.manifest_id,
                "queryId": self.query_id,
                "batchId": self.batch_id,
                "sources": self.sources,
                "offsets": self.offsets,
                "files": self.files,
                "committedMs": self.committed_ms,
            },
            sort_keys=False,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, text: str) -> "CommitRecord":
        raw = json.loads(text)
        return cls(
            manifest_id=int(raw["manifestId"]),
            query_id=raw["queryId"],
            batch_id=raw["batchId"],
            sources=list(raw["sources"]),
            offsets=raw["offsets"],
            files=int(raw["files"]),
            committed_ms=int(raw["committedMs"]),
        )


class SinkState:
    """``<out>/_sink``: commit records and query registrations."""

    def __init__(self, fs: pafs.FileSystem, root: str) -> None:
        self.fs = fs
        self.directory = f"{root.rstrip('/')}/{SINK_DIR}"

    def record_path(self, manifest_id: int) -> str:
        return f"{self.directory}/offsets/{manifest_id}"

    def write_record(self, record: CommitRecord) -> None:
        self.fs.create_dir(f"{self.directory}/offsets", recursive=True)
        write_replace(self.fs, self.record_path(record.manifest_id), record.to_json())

    def read_record(self, manifest_id: int) -> CommitRecord:
        """The record of a *committed* manifest (its absence means the output was edited)."""
        text = read_text(self.fs, self.record_path(manifest_id))
        if text is None:
            raise FileSinkError(
                f"{self.record_path(manifest_id)} is missing although manifest {manifest_id} is "
                "committed; the output directory was edited by hand"
            )
        return CommitRecord.from_json(text)

    def register_query(self, query_id: str, checkpoint_location: str, first_manifest_id: int) -> None:
        """Record that ``query_id`` may commit from ``first_manifest_id`` on (kept if present)."""
        self.fs.create_dir(f"{self.directory}/queries", recursive=True)
        body = json.dumps(
            {
                "queryId": query_id,
                "checkpointLocation": checkpoint_location,
                "firstManifestId": first_manifest_id,
                "createdMs": int(time.time() * 1000),
            }
        ).encode("utf-8")
        create_if_absent(self.fs, f"{self.directory}/queries/{query_id}", body)

    def first_manifest_of(self, query_id: str) -> int | None:
        text = read_text(self.fs, f"{self.directory}/queries/{query_id}")
        return None if text is None else int(json.loads(text)["firstManifestId"])

    def last_commit_of(self, query_id: str, latest_manifest: int | None) -> CommitRecord | None:
        """The newest committed record of ``query_id`` (None if it never committed).

        Scans records from the newest manifest down to the query's first one; normally the
        newest record is the query's own, so this reads one file.
        """
        if latest_manifest is None:
            return None
        first = self.first_manifest_of(query_id)
        if first is None:
            return None
        for manifest_id in range(latest_manifest, first - 1, -1):
            record = self.read_record(manifest_id)
            if record.query_id == query_id:
                return record
        return None


@dataclass(frozen=True)
class Discontinuity:
    topic: str
    partition: str
    committed: int
    starts_at: int | None  # None: the batch read nothing from this partition
    kind: str  # "overlap" or "gap"


def find_discontinuities(
    committed: KafkaOffsets,
    exact_start: KafkaOffsets | None,
    end: KafkaOffsets | None,
    observed_min: KafkaOffsets | None,
) -> list[Discontinuity]:
    """Compare where a batch starts with the offsets the output already covers.

    ``exact_start`` is known for Spark batch N > 0 (``offsets/<N-1>``). For batch 0 Spark keeps
    no start offset of a Python source, so it is bounded by the rows' smallest ``offset`` per
    partition (``observed_min``) and the batch's ``end``: rows below the committed offset are
    certain duplicates; a first row above it, or an end past it with no rows, may be a gap (or
    only transaction markers / compacted records, which is what failOnDataLoss=false accepts).
    Partitions the new query does not read are not compared.
    """
    found: list[Discontinuity] = []
    for topic, parts in sorted(committed.items()):
        for partition, next_offset in sorted(parts.items(), key=lambda kv: int(kv[0])):
            def add(starts_at: int | None, kind: str) -> None:
                found.append(Discontinuity(topic, partition, next_offset, starts_at, kind))

            if exact_start is not None:
                start = exact_start.get(topic, {}).get(partition)
                if start is not None and start != next_offset:
                    add(start, "overlap" if start < next_offset else "gap")
                continue
            batch_end = (end or {}).get(topic, {}).get(partition)
            first_row = (observed_min or {}).get(topic, {}).get(partition)
            if first_row is not None:
                if first_row < next_offset:
                    add(first_row, "overlap")
                elif first_row > next_offset:
                    add(first_row, "gap")
            elif batch_end is not None and batch_end < next_offset:
                add(batch_end, "overlap")
            elif batch_end is not None and batch_end > next_offset:
                add(None, "gap")
    return found


def continuity_error(
    problems: list[Discontinuity], committed: KafkaOffsets, output: str, batch_id: int, query_id: str
) -> OffsetContinuityError:
    lines = []
    for d in problems:
        where = f"{d.topic}-{d.partition}"
        if d.kind == "overlap":
            lines.append(f"  {where}: output holds records up to offset {d.committed - 1}, this batch starts at "
                         f"{d.starts_at} ({d.committed - d.starts_at} records would be written twice)")
        elif d.starts_at is None:
            lines.append(f"  {where}: output continues at offset {d.committed}, this batch read no record "
                         "of it although its end offset is past that (possible gap)")
        else:
            lines.append(f"  {where}: output continues at offset {d.committed}, this batch starts at "
                         f"{d.starts_at} ({d.starts_at - d.committed} offsets would be skipped)")
    return OffsetContinuityError(
        f"batch {batch_id} of query {query_id} does not continue the output {output}:\n"
        + "\n".join(lines)
        + "\nNothing of this batch was committed. Stop the query, delete its checkpoint and restart "
        f"the source with startingOffsets='{offsets_json(committed)}' (the pylog source does this "
        "with option startingOffsetsFromOutput). If the skipped offsets hold only transaction "
        "markers or compacted records, set the sink option failOnDataLoss=false."
    )
