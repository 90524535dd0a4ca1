"""pylog under Spark Connect: PySpark's own Connect server, driven from a thin-client virtualenv.

1. Starts ``org.apache.spark.sql.connect.service.SparkConnectServer`` from this Python's PySpark
   (its jars ship the server: ``pyspark/jars/spark-connect_*.jar``) on a free loopback port, with
   this Python, where pylog is installed, as the Python of its workers: the data sources, and the
   ``foreachBatch`` functions of Connect clients, run there.
2. Meanwhile builds the pure wheel of this checkout (scripts/build_dist.py) and a fresh client
   virtualenv holding ``<wheel>[connect]`` and ``pyspark-client`` at the newest
   release not newer than the server's Spark (Spark checks older clients against newer servers;
   a newer client may send what the server does not know), and no ``pyspark``.
3. Runs scripts/connect_client.py in that virtualenv, from outside the checkout: format("pylog")
   with no register() call, readStream into pylog-files with Trigger.AvailableNow, the topic sink,
   kafka_spark.topic_writer in foreachBatch and kafka_spark.lag_metrics from the query's progress.
   ``--full`` adds replays (exactly once for both sinks and topic_writer), a batch write to a topic,
   kafka_spark.register and LagListener.

    python scripts/check_connect.py                     # the short run (tests/test_connect.py)
    python scripts/check_connect.py --full
    python scripts/check_connect.py --client-venv DIR   # keep the client virtualenv in DIR, reuse it

The server's Python needs PySpark's ``connect`` extra (grpcio, ...) for ``foreachBatch``: pylog's
``test`` extra brings it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from check_install import ROOT, build_artifacts, clean_env, make_venv, run

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: The oldest thin client pylog declares (setup.cfg, extra `connect`).
CLIENT_FLOOR = "4.0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_pyspark() -> tuple[str, Path]:
    """This Python's PySpark release and its folder, after checking that it can serve Connect."""
    try:
        import pyspark
    except ImportError:
        raise SystemExit(
            f"check_connect: this Python ({sys.executable}) has no PySpark to serve Connect from: "
            "run it with .venv/bin/python"
        ) from None
    home = Path(pyspark.__file__).parent
    if not list((home / "jars").glob("spark-connect_*.jar")):
        raise SystemExit(f"check_connect: PySpark {pyspark.__version__} in {home} ships no spark-connect jar")
    missing = [m for m in ("grpc", "grpc_status", "google.rpc") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(
            f"check_connect: this Python ({sys.executable}) lacks {', '.join(missing)}, which the Connect "
            "server's Python workers need for foreachBatch: pip install 'pyspark[connect]'"
        )
    return pyspark.__version__, home


@contextmanager
def connect_server(work: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    """A Spark Connect server on a free loopback port, in a process group of its own (the JVM and
    its Python workers), stopped on exit. Yields (process, port, log file)."""
    _, home = server_pyspark()
    port = free_port()
    log = work / "connect-server.log"
    server_env = {**env, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [
        str(home / "bin" / "spark-submit"),
        "--master",
        "local[2]",
        "--class",
        SERVER_CLASS,
        "--name",
        "pylog-connect-check",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.log.level=WARN",
        "spark-internal",
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=work, env=server_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield process, port, log
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
    try:  # Python workers the JVM started, if any outlived it
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_until_serving(process: subprocess.Popen, port: int, log: Path, deadline_s: float = 300) -> float:
    """Seconds until the server accepts connections on ``port``; fails if it exits first."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if process.poll() is not None:
            raise SystemExit(f"check_connect: the Connect server exited ({process.returncode}):\n{_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return time.monotonic() - started
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"check_connect: the Connect server did not listen on {port} in {deadline_s:.0f} s:\n{_tail(log)}")


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def client_venv(venv: Path, work: Path, env: dict[str, str], server_version: str) -> str:
    """The thin-client virtualenv, made fresh, or reused (``--client-venv``) when it was made for
    this server's release: then only this checkout's wheel is installed again."""
    # The pure wheel, what any client platform gets (the client never runs pylog consume).
    wheel = build_artifacts(work, env, platform=False)["pure"]
    stamp = venv / ".pylog-server"
    python = str(venv / "bin" / "python")
    if stamp.exists() and stamp.read_text() == server_version and os.path.exists(python):
        run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
            cwd=work,
            env=env,
            what=f"installing {wheel.name} into the client virtualenv {venv}",
        )
        return python
    shutil.rmtree(venv, ignore_errors=True)
    python = make_venv(venv, env)
    run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], cwd=work, env=env, what="upgrading pip")
    client = f"pyspark-client>={CLIENT_FLOOR},<={server_version}"
    run(
        [python, "-m", "pip", "install", "-q", f"{wheel}[connect]", client],
        cwd=work,
        env=env,
        what=f"installing {wheel.name}[connect] and {client}",
    )
    stamp.write_text(server_version)
    return python


def check(work: Path, *, venv: Path, full: bool) -> None:
    env = clean_env(work)
    server_version, _ = server_pyspark()
    print(f"check_connect: server: PySpark {server_version} in {sys.executable}", flush=True)
    with connect_server(work, env) as (process, port, log):
        python = client_venv(venv, work, env, server_version)
        waited = wait_until_serving(process, port, log)
        print(f"check_connect: Connect server listening on 127.0.0.1:{port} ({waited:.0f} s more)", flush=True)
        out = work / "client"  # the client's broker is new: so must its checkpoints be
        shutil.rmtree(out, ignore_errors=True)
        command = [python, str(ROOT / "scripts" / "connect_client.py"), f"sc://127.0.0.1:{port}", str(out)]
        if full:
            command.append("--full")
        result = subprocess.run(command, cwd=work, env=env)
        if result.returncode != 0:
            print(f"check_connect: server log (last lines):\n{_tail(log)}", flush=True)
            raise SystemExit(f"check_connect: the client failed (exit {result.returncode})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="add replays, batch writes, register() and LagListener")
    parser.add_argument("--work-dir", type=Path, help="where to build and run (default: a temporary directory)")
    parser.add_argument("--client-venv", type=Path, help="keep the client virtualenv here and reuse it next time")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pylog-connect-") as temporary:
        work = (args.work_dir or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        check(work, venv=(args.client_venv or work / "client-venv").resolve(), full=args.full)
    print(f"check_connect: ok in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
