"""The Spark-compatible ``_spark_metadata`` log: the file sink's commit point.

Stock Spark (``spark.read.parquet(out)``, ``spark.readStream.format("parquet").load(out)``) lists
only the files named in ``<out>/_spark_metadata/`` once that directory exists, so publishing one
log file per batch makes the batch visible atomically. The format is Spark's
``FileStreamSinkLog`` (``CompactibleFileStreamLog.serialize``), byte for byte:

* one file per batch, named by the decimal id with no padding (``0``, ``1``, ...);
* every batch with ``(id + 1) % 10 == 0`` is written as ``<id>.compact`` instead and holds the
  union of the previous compact file, the plain files since and the new entries; Spark readers
  look for ``9.compact``, ``19.compact``... and fail without them;
* content: the line ``v1``, then one JSON object per line, ``\\n``-separated, no trailing
  newline, UTF-8, keys in this order:
  ``{"path":<uri>,"size":<bytes>,"isDir":false,"modificationTime":<epoch ms>,
  "blockReplication":<int>,"blockSize":<int>,"action":"add"}``.
  ``path`` is a fully-qualified, percent-encoded URI (``file:///out/part-...``).

Ids are contiguous from 0: :meth:`MetadataLog.add` only ever creates ``latest + 1``. Files are
created with :func:`kafka_spark.files.fs.create_if_absent` and never rewritten or deleted (old
batch files stay; Spark's ``deleteExpiredLog`` is an optimisation readers do not need).

Corruption: every file read is parsed strictly as Spark reads it (UTF-8, the version line, one
JSON object per line with Spark's fields and types); a file that does not parse raises
:class:`MalformedMetadataLogError` naming the file, the line and what is wrong. Before a writer
appends, :meth:`MetadataLog.check_newest` parses the newest file, and a compaction parses its
inputs, so the sink never builds on a log stock readers cannot read.

Thread-safety: a MetadataLog holds no mutable state; concurrent writers are detected (the loser's
create fails), not serialised.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow.fs as pafs

from kafka_spark.files.fs import FileSinkError, create_if_absent, list_names, read_bytes

METADATA_DIR = "_spark_metadata"
COMPACT_INTERVAL = 10  # spark.sql.streaming.fileSink.log.compactInterval default; readers assume it
COMPACT_SUFFIX = ".compact"
VERSION_LINE = "v1"


class MalformedMetadataLogError(FileSinkError):
    """A ``_spark_metadata`` file is missing or unreadable where the log says it must be."""


_FIELDS = {
    "path": str,
    "size": int,
    "isDir": bool,
    "modificationTime": int,
    "blockReplication": int,
    "blockSize": int,
    "action": str,
}


@dataclass(frozen=True)
class SinkFileStatus:
    """One manifest entry (Spark's ``SinkFileStatus``)."""

    path: str
    size: int
    modification_time: int
    is_dir: bool = False
    block_replication: int = 1
    block_size: int = 33554432  # what Spark logs for the local filesystem
    action: str = "add"

    def to_json(self) -> str:
        # Field order and compact separators as json4s writes them; readers do not care about the
        # order, but the golden test compares bytes with what Spark writes.
        return json.dumps(
            {
                "path": self.path,
                "size": self.size,
                "isDir": self.is_dir,
                "modificationTime": self.modification_time,
                "blockReplication": self.block_replication,
                "blockSize": self.block_size,
                "action": self.action,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, line: str) -> SinkFileStatus:
        return cls.from_dict(json.loads(line))

    @classmethod
    def from_dict(cls, raw: dict) -> SinkFileStatus:
        return cls(
            path=raw["path"],
            size=int(raw["size"]),
            modification_time=int(raw["modificationTime"]),
            is_dir=bool(raw["isDir"]),
            block_replication=int(raw["blockReplication"]),
            block_size=int(raw["blockSize"]),
            action=raw["action"],
        )


def is_compaction_batch(batch_id: int, interval: int = COMPACT_INTERVAL) -> bool:
    return (batch_id + 1) % interval == 0


def serialize(entries: list[SinkFileStatus]) -> bytes:
    return "\n".join([VERSION_LINE, *(e.to_json() for e in entries)]).encode("utf-8")


def _entry(line: str) -> SinkFileStatus:
    """One log line as Spark's json4s reads it; ValueError says what is wrong."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    for name, kind in _FIELDS.items():
        value = raw.get(name)
        if value is None:
            raise ValueError(f"field {name!r} is missing")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"field {name!r} is {type(value).__name__}, not {kind.__name__}")
    return SinkFileStatus.from_dict(raw)


def deserialize(data: bytes | str, where: str) -> list[SinkFileStatus]:
    """Parse one log file as Spark does; :class:`MalformedMetadataLogError` names ``where``, the
    line and what is wrong."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMetadataLogError(
                f"{where}: not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start})"
            ) from None
    else:
        text = data
    lines = text.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # a trailing newline, which Spark's line reader ignores too
    if lines[0] != VERSION_LINE:
        found = repr(lines[0][:40]) if lines[0] else "nothing (the file is empty)"
        raise MalformedMetadataLogError(f"{where}: line 1 must be the version {VERSION_LINE!r}, found {found}")
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            entries.append(_entry(line))
        except ValueError as exc:
            raise MalformedMetadataLogError(f"{where}: line {number} is {exc}") from None
    return entries


class MetadataLog:
    """``<root>/_spark_metadata`` on a pyarrow filesystem."""

    def __init__(self, fs: pafs.FileSystem, root: str) -> None:
        self.fs = fs
        self.directory = f"{root.rstrip('/')}/{METADATA_DIR}"

    def file_for(self, batch_id: int) -> str:
        suffix = COMPACT_SUFFIX if is_compaction_batch(batch_id) else ""
        return f"{self.directory}/{batch_id}{suffix}"

    def batch_ids(self) -> list[int]:
        """Committed ids, ascending. Hidden temp files and foreign names are ignored, as Spark does."""
        ids = []
        for name in list_names(self.fs, self.directory):
            stem = name[: -len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
            if stem.isdigit():
                ids.append(int(stem))
        return sorted(ids)

    def latest_id(self) -> int | None:
        ids = self.batch_ids()
        return ids[-1] if ids else None

    def exists(self) -> bool:
        """Whether the directory exists (from then on Spark shows only logged files)."""
        return self.fs.get_file_info(self.directory).type == pafs.FileType.Directory

    def get(self, batch_id: int) -> list[SinkFileStatus] | None:
        """Entries of the file for ``batch_id`` (a compact file holds all entries so far)."""
        path = self.file_for(batch_id)
        data = read_bytes(self.fs, path)
        if data is None:
            return None
        try:
            return deserialize(data, path)
        except MalformedMetadataLogError as exc:
            raise MalformedMetadataLogError(self._corrupt_advice(batch_id, str(exc))) from None

    def _corrupt_advice(self, batch_id: int, what: str) -> str:
        holds = (
            f"it lists every file committed up to batch {batch_id}"
            if is_compaction_batch(batch_id)
            else f"it lists the files of batch {batch_id}"
        )
        return (
            f"{what}. This _spark_metadata file is not in Spark's file-sink log format, so stock "
            f"Spark readers of the output fail on it too; {holds}. The sink commits nothing on "
            f"top of it. Restore {self.file_for(batch_id)} from a backup or a copy of the output "
            "(the part files it lists are still in place), then restart the query."
        )

    def check_newest(self) -> int | None:
        """Parse the newest log file (raising :class:`MalformedMetadataLogError`, which names it,
        if it is garbled) before anything is appended after it; return its id."""
        latest = self.latest_id()
        if latest is not None:
            self.get(latest)
        return latest

    def all_files(self, latest: int | None = None) -> list[SinkFileStatus]:
        """Every file visible at ``latest`` (default: the newest id), as Spark's ``allFiles``."""
        latest = self.latest_id() if latest is None else latest
        if latest is None:
            return []
        # The newest compact file at or below `latest` (-1 before batch 9) holds everything before it.
        last_compaction = latest - (latest + 1) % COMPACT_INTERVAL
        entries: list[SinkFileStatus] = []
        for batch_id in range(max(last_compaction, 0), latest + 1):
            found = self.get(batch_id)
            if found is None:
                raise MalformedMetadataLogError(
                    f"{self.file_for(batch_id)} does not exist although batch {latest} is committed; "
                    "the _spark_metadata log was edited by hand"
                )
            entries.extend(found)
        return entries

    def add(self, batch_id: int, entries: list[SinkFileStatus]) -> bool:
        """Publish ``batch_id`` (create-if-absent). False if a file for that id already exists.

        A compaction batch carries every visible entry: ``all_files(batch_id - 1) + entries``.
        """
        if is_compaction_batch(batch_id):
            entries = self.all_files(batch_id - 1) + list(entries)
        self.fs.create_dir(self.directory, recursive=True)
        return create_if_absent(self.fs, self.file_for(batch_id), serialize(entries))
