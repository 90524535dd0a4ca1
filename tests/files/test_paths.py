"""Output paths: URIs logged in _spark_metadata, credentials, and the commit primitive per filesystem."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from kafka_spark.files.fs import (
    FileSinkError,
    OutputLocation,
    UnsupportedFilesystemError,
    create_if_absent,
    resolve_output,
)


def test_path_with_space_is_logged_percent_encoded_and_spark_reads_it(spark, tmp_path):
    out = str(tmp_path / "my out")
    spark.range(4).write.format("pylog-files").mode("append").save(out)
    manifest = open(os.path.join(out, "_spark_metadata", "0")).read()
    assert "file://" + str(tmp_path).replace(" ", "%20") + "/my%20out/part-" in manifest
    assert sorted(r.id for r in spark.read.parquet(out).collect()) == [0, 1, 2, 3]


def test_file_uri_and_relative_path_resolve_to_the_same_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_output("out").root == str(tmp_path / "out")
    assert resolve_output(f"file://{tmp_path}/out").root == str(tmp_path / "out")
    assert resolve_output(f"file:{tmp_path}/out").to_uri(str(tmp_path / "out" / "a")) == f"file://{tmp_path}/out/a"


def test_s3a_output_is_logged_with_s3a_uris():
    location = OutputLocation(pafs.S3FileSystem(anonymous=True, region="us-east-1"), "bucket/out", "s3a://")
    uri = location.to_uri("bucket/out/p=1/part-00000-0-x.parquet")
    assert uri == "s3a://bucket/out/p=1/part-00000-0-x.parquet"
    assert location.from_uri(uri) == "bucket/out/p=1/part-00000-0-x.parquet"


def test_credentials_in_the_path_are_refused_without_echoing_them():
    with pytest.raises(FileSinkError, match="carries credentials") as info:
        resolve_output("s3a://AKIAEXAMPLE:topsecret@bucket/out")
    assert "topsecret" not in str(info.value)


def test_create_if_absent_refuses_filesystems_without_an_exclusive_create(tmp_path):
    wrapped = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    with pytest.raises(UnsupportedFilesystemError, match="create-if-absent"):
        create_if_absent(wrapped, "x", b"data")
    assert not (tmp_path / "x").exists()


def test_create_if_absent_never_replaces(tmp_path):
    fs = pafs.LocalFileSystem()
    target = str(tmp_path / "0")
    assert create_if_absent(fs, target, b"first")
    assert not create_if_absent(fs, target, b"second")
    assert open(target, "rb").read() == b"first"
    assert os.listdir(tmp_path) == ["0"]  # no temp file left behind
