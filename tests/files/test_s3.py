"""The file sink on S3: a streaming query writes to ``s3://`` (moto's S3 server, which honours
If-None-Match), is killed with SIGKILL mid-stream and restarted from its checkpoint; every
record is committed exactly once and the manifests list exactly the files read back.

Spark itself never touches S3 here (every byte goes through pyarrow and boto3 in the sink), so no
Hadoop S3 connector is needed; the results are read back with pyarrow.
"""

from __future__ import annotations

import os
import subprocess
import sys

import boto3
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

from kafka_spark.files.fs import create_if_absent, resolve_output
from kafka_spark.files.metadata_log import MetadataLog
from kafka_spark.files.table import committed_source_offsets, vacuum
from tests.files.test_kill import END, QUERY, STEP, kill_within_a_later_batch  # the same query, on S3
from tests.support.paths import ROOT
from tests.support.waiting import wait_until

BUCKET = "lake"


@pytest.fixture
def s3(monkeypatch):
    """An S3 endpoint on loopback with one bucket; the environment points boto3 and pyarrow at it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    settings = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    yield settings
    server.stop()


def test_create_if_absent_never_replaces_an_object(s3):
    location = resolve_output(f"s3a://{BUCKET}/t")
    assert location.uri_prefix == "s3a://"  # logged as the user wrote it, opened as pyarrow's s3
    target = location.join("_spark_metadata", "0")
    assert create_if_absent(location.fs, target, b"v1\nfirst\n") is True
    assert create_if_absent(location.fs, target, b"v1\nsecond\n") is False  # S3 answered 412
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="t/_spark_metadata/0")["Body"].read()
    assert body == b"v1\nfirst\n"


def start_query(script: str, out: str, checkpoint: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, script, out, checkpoint, str(END), str(STEP)],
        cwd=ROOT,
        start_new_session=True,  # its own process group: the kill takes the JVM and workers too
        env=dict(os.environ, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def manifests(prefix: str) -> list[str]:
    listing = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/_spark_metadata/")
    return [item["Key"] for item in listing.get("Contents", [])]


@pytest.mark.spark  # Spark runs in a subprocess
def test_sigkill_mid_stream_on_s3_then_restart_is_exactly_once(s3, tmp_path):
    script = tmp_path / "query.py"
    script.write_text(QUERY)
    out, checkpoint = f"s3://{BUCKET}/out", str(tmp_path / "ck")

    driver = start_query(str(script), out, checkpoint, s3)
    wait_until(
        lambda: len(manifests("out")) >= 2 or driver.poll() is not None,
        "the query's first two manifests",
        timeout=120,
    )
    kill_within_a_later_batch(driver, out)

    restarted = start_query(str(script), out, checkpoint, s3)
    assert restarted.wait(timeout=180) == 0
    assert committed_source_offsets(out) == {"t": {"0": END, "1": END}}

    location = resolve_output(out)
    logged = MetadataLog(location.fs, location.root).all_files()
    rows = []
    for status in logged:
        object_path = location.from_uri(status.path)
        assert location.fs.get_file_info(object_path).size == status.size  # logged with its real size
        table = pq.read_table(object_path, filesystem=location.fs)
        rows += zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    assert sorted(rows) == sorted((p, o) for p in range(2) for o in range(END))

    vacuum(out, older_than_seconds=0)  # orphans of the killed batch go; committed objects stay
    listing = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/part-")
    on_s3 = {item["Key"].rsplit("/", 1)[1] for item in listing.get("Contents", [])}
    assert on_s3 == {location.from_uri(status.path).rsplit("/", 1)[1] for status in logged}
