"""Small files that must never be seen half-written: offset checkpoints and topic metadata.

``atomic_write`` writes a temporary file, fsyncs it, renames it over the target and fsyncs the
directory, so after a crash the target holds either the old or the new content.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafka_spark.common.durable import fsync_dir

TMP_SUFFIX = ".tmp"


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_offset(path: Path) -> int | None:
    """The offset stored in ``path`` (one decimal line), or None if the file does not exist."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"checkpoint {path} holds {text!r}, not an offset; delete it to rebuild from the log"
        ) from None


def write_offset(path: Path, offset: int) -> None:
    atomic_write(path, f"{offset}\n".encode("ascii"))
