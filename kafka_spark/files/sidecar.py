"""The offsets sidecar ``<out>/_sink/``: which query committed each manifest, covering which offsets.

Layout (JSON, UTF-8; credentials and Spark confs are never copied in):

``_sink/offsets/<manifestId>``
    ``{"manifestId": M, "queryId": q | null, "batchId": N | null, "sources": [<raw offset json> |
    null, ...], "offsets": {"topic": {"0": next_offset}} | null, "files": k, "committedMs": t,
    "outputOffsets": {"topic": {"0": next_offset}}, "otherSourceQueries": [q, ...]}``.
    Written (replace allowed) just *before* ``_spark_metadata/<M>`` is published; it counts only
    if that manifest exists. ``sources`` are the source lines of Spark's
    ``<checkpoint>/offsets/<N>`` (end offsets of batch N, one per source); ``offsets`` is their
    merge when they are Kafka-style (``{"topic": {"partition": next_offset}}``), as Spark's Kafka
    source and pylog's source write them. Batch (non-streaming) jobs have ``queryId`` null.
    ``outputOffsets`` and ``otherSourceQueries`` describe the whole output once M is committed
    (:class:`kafka_spark.files.continuity.OutputCoverage`): per topic-partition the end offset of
    the newest batch that read it, and the streaming queries whose batches read sources without
    Kafka-style offsets. Records written before these two fields existed lack them; the
    coverage is then rebuilt from all records.
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

from kafka_spark.files.fs import FileSinkError, create_if_absent, read_bytes, read_text, write_replace
from kafka_spark.offsets import EPOCHS_KEY, START_KEY, first_batch_start

SINK_DIR = "_sink"
KafkaOffsets = dict[str, dict[str, int]]


class CheckpointError(FileSinkError):
    """Spark's checkpoint does not hold what the sink needs (metadata or offsets/<N>)."""


class OffsetContinuityError(FileSinkError):
    """A new query would duplicate or skip records relative to what the output already holds."""


class SinkStateError(FileSinkError):
    """A file under ``<out>/_sink`` cannot be read; the message names it and what to do."""


def offsets_json(offsets: KafkaOffsets) -> str:
    """Spark's Kafka offset JSON: ``{"t":{"0":23,"1":-1}}``, topics and partitions sorted."""
    ordered = {topic: {p: offsets[topic][p] for p in sorted(offsets[topic], key=int)} for topic in sorted(offsets)}
    return json.dumps(ordered, separators=(",", ":"))


def kafka_offsets_of(raw: str | None) -> KafkaOffsets | None:
    """A source's offset JSON as Kafka-style offsets, or None if it has another shape."""
    if raw is None:
        return None
    try:
        return _as_kafka_offsets(json.loads(raw))
    except json.JSONDecodeError:
        return None


def kafka_first_batch_start(raw: str | None) -> KafkaOffsets | None:
    """The start a pylog first batch recorded in its end offsets (kafka_spark.offsets.START_KEY:
    PySpark before 4.2), as Kafka-style offsets, or None."""
    if raw is None:
        return None
    try:
        return _as_kafka_offsets(first_batch_start(json.loads(raw)))
    except json.JSONDecodeError:
        return None


def _as_kafka_offsets(value: Any) -> KafkaOffsets | None:
    if isinstance(value, dict) and (EPOCHS_KEY in value or START_KEY in value):  # pylog's: not offsets
        value = {topic: parts for topic, parts in value.items() if topic not in (EPOCHS_KEY, START_KEY)}
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
        parsed = kafka_offsets_of(raw)
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

    def query_id_if_started(self) -> str | None:
        """The query id, or None while Spark has not written ``metadata`` yet."""
        try:
            return self.query_id()
        except CheckpointError:
            return None

    def kafka_initial_offsets(self, source_index: int) -> KafkaOffsets | None:
        """The start of Spark's Kafka source ``source_index``, from its initial-offset log
        ``sources/<i>/0`` (``KafkaSourceInitialOffsetWriter``: a zero byte, ``v1\\n``, the
        offset JSON; Spark 2.1.0 wrote the JSON alone), or None if there is no such file or it
        does not hold Kafka-style offsets (another source's log, e.g. the rate source's)."""
        data = read_bytes(self.fs, f"{self.root}/sources/{source_index}/0")
        if data is None:
            return None
        if data[:1] == b"\x00":
            data = data[1:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text.startswith("v"):
            version, _, text = text.partition("\n")
            if version != "v1":
                return None
        return kafka_offsets_of(text)

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
    #: Where the output continues once this manifest is committed (None in older records).
    output_offsets: KafkaOffsets | None = None
    #: Streaming queries that wrote batches of non-Kafka-style sources (None in older records).
    other_source_queries: tuple[str, ...] | None = None

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
                "outputOffsets": self.output_offsets,
                "otherSourceQueries": None if self.other_source_queries is None else list(self.other_source_queries),
            },
            sort_keys=False,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, text: str) -> CommitRecord:
        raw = json.loads(text)
        offsets = raw["offsets"]
        if offsets is not None and _as_kafka_offsets(offsets) is None:
            raise ValueError("'offsets' is not Kafka-style offsets")
        output = raw.get("outputOffsets")
        if output is not None and output != {} and _as_kafka_offsets(output) is None:
            raise ValueError("'outputOffsets' is not Kafka-style offsets")
        others = raw.get("otherSourceQueries")
        return cls(
            manifest_id=int(raw["manifestId"]),
            query_id=raw["queryId"],
            batch_id=None if raw["batchId"] is None else int(raw["batchId"]),
            sources=list(raw["sources"]),
            offsets=offsets,
            files=int(raw["files"]),
            committed_ms=int(raw["committedMs"]),
            output_offsets=output,
            other_source_queries=None if others is None else tuple(str(q) for q in others),
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
        """The record of a *committed* manifest (its absence means the output was edited).
        Raises :class:`SinkStateError` naming the file if it cannot be read."""
        path = self.record_path(manifest_id)
        try:
            text = read_text(self.fs, path)
            if text is None:
                raise SinkStateError(
                    f"{path} is missing although manifest {manifest_id} is committed; the output "
                    "directory was edited by hand. Restore the file from a backup or a copy of the "
                    "output."
                )
            record = CommitRecord.from_json(text)
            if record.manifest_id != manifest_id:
                raise ValueError(f"it names manifest {record.manifest_id}")
            return record
        except SinkStateError:
            raise
        except (FileSinkError, ValueError, KeyError, TypeError, AttributeError) as exc:
            what = str(exc) if isinstance(exc, (FileSinkError, ValueError)) else f"field {exc} is missing or wrong"
            raise SinkStateError(
                f"{path} cannot be read ({what}). It is the sink's record of manifest "
                f"{manifest_id}: which query committed it and the source offsets it covers. The "
                "sink commits nothing until it is readable (the data of the manifest is intact and "
                "visible to Spark readers). Restore the file from a backup or a copy of the "
                "output, then restart the query."
            ) from None

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
        path = f"{self.directory}/queries/{query_id}"
        try:
            text = read_text(self.fs, path)
            return None if text is None else int(json.loads(text)["firstManifestId"])
        except (FileSinkError, ValueError, KeyError, TypeError) as exc:
            raise SinkStateError(
                f"{path} cannot be read ({exc}). It records that query {query_id} writes to this "
                "output and from which manifest on. Restore it from a backup or a copy of the "
                "output, then restart the query."
            ) from None

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
