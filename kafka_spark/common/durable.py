"""Durability of directory entries, shared by the broker's storage and the connector's file sink."""

from __future__ import annotations

import os

__all__ = ["fsync_dir"]


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync ``directory`` itself: a file created, linked or renamed in it survives a power cut
    only once the directory entry is on disk, not when the file's own data is."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
