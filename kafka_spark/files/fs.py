"""Filesystem access for the file sink: path resolution and the create-if-absent primitive.

Every byte the file sink writes goes through pyarrow.fs, so local paths and URIs (``file:``,
``hdfs://``, ``s3://`` / ``s3a://``) behave the same way. Two things are specific to this module:

* :func:`resolve_output` turns the user's ``path`` into a pyarrow filesystem, a filesystem path
  and the **URI prefix written into** ``_spark_metadata``. The prefix keeps the user's scheme and
  authority (``s3a://bucket`` stays ``s3a`` even though pyarrow opens it as ``s3``), because stock
  Spark readers compare the logged paths with the root path they were given.
* :func:`create_if_absent` publishes a small file (a manifest, a query record) so that it either
  appears complete or not at all, and **never replaces an existing file**. It is the commit
  primitive. What it uses per filesystem:

  - local: write ``.<name>.<uuid>.tmp`` in the same directory, fsync, ``os.link(tmp, final)``
    (fails with EEXIST when ``final`` exists), unlink the temp file, fsync the directory.
    ``os.rename``/``os.replace`` are never used for the commit: they overwrite silently.
  - HDFS: write the temp file, then ``HadoopFileSystem.move`` = ``FileSystem.rename``, which on
    HDFS refuses to overwrite an existing destination (the primitive Spark's own
    ``FileContextBasedCheckpointFileManager`` relies on). Not exercised by the tests here.
  - S3: no rename at all; the object is PUT directly with ``If-None-Match: *`` through boto3
    (pyarrow has no conditional PUT). S3 answers 412 when the key exists. Requires boto3 and a
    store that honours the header (AWS since 2024-08; check your S3-compatible store). Tested
    against moto's S3 server, a streaming query killed mid-stream included.
  - anything else (GCS, Azure, fsspec): refused with :class:`UnsupportedFilesystemError`,
    because an exists-check followed by a write is not atomic.

Thread-safety: the functions are stateless; pyarrow filesystems are safe to share.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlparse

import pyarrow.fs as pafs

from kafka_spark.common.durable import fsync_dir
from kafka_spark.errors import PylogError


class FileSinkError(PylogError):
    """Base class of the file sink's errors."""


class UnsupportedFilesystemError(FileSinkError):
    """The output filesystem offers no create-if-absent primitive the sink can commit with."""


# Characters kept verbatim in a logged path URI (RFC 3986 pchar plus '/'). Spark's
# SparkPath.urlEncoded escapes the same way: a space becomes %20 and '%' becomes %25, which
# Spark decodes again with new URI(path) when it reads the log.
_URI_SAFE = "/-._~!$&'()*+,;=:@"


@dataclass(frozen=True)
class OutputLocation:
    """Where the sink writes: a pyarrow filesystem, the root as that filesystem's path, and how
    filesystem paths map to the URIs in ``_spark_metadata`` entries.

    ``uri_prefix`` is ``scheme://authority`` for filesystems whose paths start with ``/`` (local,
    HDFS), and ``scheme://`` for object stores, whose pyarrow paths start with the bucket.
    """

    fs: pafs.FileSystem
    root: str
    uri_prefix: str

    @property
    def bucket_in_path(self) -> bool:
        return not self.root.startswith("/")

    def join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def to_uri(self, fs_path: str) -> str:
        """The fully-qualified, percent-encoded URI Spark expects in a manifest entry."""
        return self.uri_prefix + quote(fs_path, safe=_URI_SAFE)

    def from_uri(self, uri: str) -> str:
        """The filesystem path of a manifest entry written by :meth:`to_uri` (or by Spark)."""
        parsed = urlparse(uri)
        path = unquote(parsed.path)
        return parsed.netloc + path if self.bucket_in_path else path


def resolve_output(path: str, option: str = "path") -> OutputLocation:
    """Resolve the user's output ``path`` (a local path or a URI).

    Raises :class:`FileSinkError` naming ``option`` for a path with embedded credentials (they
    would end up in every manifest line) or a URI pyarrow cannot open.
    """
    if not path:
        raise FileSinkError(f"option {option!r} is required: the directory the sink writes to")
    parsed = urlparse(path)
    if parsed.password is not None:
        raise FileSinkError(
            f"option {option!r} carries credentials in its URI; the sink would write them into "
            "every _spark_metadata entry. Configure credentials in the environment or the "
            "filesystem configuration instead."
        )
    scheme = parsed.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        local = unquote(parsed.path) if scheme == "file" else path
        root = os.path.abspath(local)
        return OutputLocation(pafs.LocalFileSystem(), root, "file://")
    # Spark's Hadoop connector is s3a://, pyarrow's is s3://: open with s3, log with the user's s3a.
    arrow_uri = ("s3" + path[len(scheme) :]) if scheme == "s3a" else path
    try:
        fs, fs_path = pafs.FileSystem.from_uri(arrow_uri)
    except (ValueError, OSError) as exc:
        raise FileSinkError(f"option {option!r}: pyarrow cannot open {path!r}: {exc}") from exc
    fs_path = fs_path.rstrip("/")
    prefix = f"{parsed.scheme}://" if not fs_path.startswith("/") else f"{parsed.scheme}://{parsed.netloc}"
    return OutputLocation(fs, fs_path, prefix)


def read_bytes(fs: pafs.FileSystem, path: str) -> bytes | None:
    """The content of ``path``, or None if it does not exist."""
    try:
        with fs.open_input_stream(path) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def read_text(fs: pafs.FileSystem, path: str) -> str | None:
    """The UTF-8 content of ``path``, or None if it does not exist. A file that is not UTF-8
    raises :class:`FileSinkError` naming it."""
    data = read_bytes(fs, path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileSinkError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start})") from None


def exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_names(fs: pafs.FileSystem, directory: str) -> list[str]:
    """Base names directly under ``directory`` ([] if it does not exist)."""
    try:
        infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    except FileNotFoundError:
        return []
    return [info.base_name for info in infos]


def _temp_path(path: str) -> str:
    head, _, name = path.rpartition("/")
    # A leading dot keeps the temp file out of Spark's listings and out of HDFSMetadataLog's
    # batch-id parsing, exactly like Spark's own `.<name>.<uuid>.tmp` files.
    return f"{head}/.{name}.{uuid.uuid4()}.tmp"


def write_replace(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Write ``path`` so readers see the old or the new content, never a torn file.

    Only for files that are *not* commit points (the offsets sidecar): it may replace an
    existing file.
    """
    if isinstance(fs, pafs.LocalFileSystem):
        tmp = _temp_path(path)
        _write_local_synced(tmp, data)
        os.replace(tmp, path)
        return
    # Object stores make a single PUT visible atomically; HDFS readers of a half-written file
    # are only other sink processes, which read sidecars of committed manifests only.
    with fs.open_output_stream(path) as out:
        out.write(data)


def create_if_absent(fs: pafs.FileSystem, path: str, data: bytes) -> bool:
    """Atomically create ``path`` with ``data`` unless it exists. True if this call created it.

    Never replaces an existing file (see the module docstring for the primitive per filesystem).
    A crash leaves either no file or the complete file, plus possibly a hidden temp file that
    :func:`kafka_spark.files.table.vacuum` removes.
    """
    if isinstance(fs, pafs.LocalFileSystem):
        tmp = _temp_path(path)
        _write_local_synced(tmp, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        # The link is durable only once the directory entry is; without this a power cut after
        # the commit could lose a manifest Spark has already recorded as committed.
        fsync_dir(os.path.dirname(path))
        return True
    if isinstance(fs, pafs.HadoopFileSystem):
        if exists(fs, path):
            return False
        tmp = _temp_path(path)
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        try:
            fs.move(tmp, path)  # HDFS rename: fails when the destination exists
        except OSError:
            fs.delete_file(tmp)
            if exists(fs, path):
                return False
            raise
        return True
    if isinstance(fs, pafs.S3FileSystem):
        return _s3_put_if_none_match(path, data)
    raise UnsupportedFilesystemError(
        f"the file sink cannot commit on {type(fs).__name__}: it needs a create-if-absent "
        "primitive (local link, HDFS rename, S3 If-None-Match). Write to a local, HDFS or S3 path."
    )


def _s3_put_if_none_match(path: str, data: bytes) -> bool:
    try:
        import boto3  # optional: pyarrow has no conditional PUT
        from botocore.exceptions import ClientError
    except ImportError as exc:
        raise UnsupportedFilesystemError(
            "committing on S3 needs boto3 (PUT with If-None-Match: *); pip install boto3 "
            "(the [s3] extra of pyspark-pylog)"
        ) from exc
    bucket, _, key = path.partition("/")
    try:
        boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
            return False
        raise
    return True


def _write_local_synced(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
