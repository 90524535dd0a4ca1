"""`pylog consume` through pylog's own Fetch client (--fetcher wire) prints the same bytes as
through confluent-kafka (--fetcher librdkafka), over a matrix of records: keys and none, empty
and null keys and values, headers, values of one-, two- and three-byte lengths, every compression
codec, aborted and committed transactions (read_committed skips the aborted ones and the
markers), several partitions, --max-messages cutting a batch, --partition, the end of the log."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from kafka_spark.cli import console_records as cr
from kafka_spark.testing import BrokerProcess
from tests.cli.test_console import interrupted
from tests.support.cli_run import pylog

FORMAT = r"%t|%p|%o|%T|%k|%K|%s|%S|%h\n"
OUTPUTS = [(), ("-J",), ("-f", FORMAT), ("--print-key", "--key-separator", "=")]


def produce_matrix(bootstrap: str, topic: str) -> int:
    """Records of every shape into partition 0 of ``topic``; returns how many a read_committed
    consumer sees."""
    seen = 0
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    shapes = [
        (None, b"plain"),
        (b"", b""),
        (b"k", None),
        (None, None),
        (b"\x80", b"\xff\xfe not UTF-8"),
        (b"multi", b"two\nlines"),
        (b"mid", b"m" * 3000),
        (b"big", b"b" * 300_000),
    ]
    for key, value in shapes:
        plain.produce(topic, value, key, 0)
        plain.flush(30)  # a batch each
    plain.produce(topic, b"hv", b"hk", 0, headers=[("a", b"1"), ("b", None), ("a", b"2"), ("", b"")])
    seen += len(shapes) + 1
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        compressed = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for i in range(20):
            compressed.produce(
                topic,
                b"%s-%d" % (codec.encode(), i) * 3,
                b"key-%d" % (i % 3) if i % 4 else None,
                0,
                headers=[("codec", codec.encode())] if i % 2 else None,
            )
        compressed.flush(30)
        seen += 20
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"matrix-{topic}"})
    transactional.init_transactions(30)
    for outcome in ("abort", "commit", "abort"):
        transactional.begin_transaction()
        for i in range(3):
            transactional.produce(topic, b"%s-%d" % (outcome.encode(), i), None, 0)
        transactional.flush(30)  # written before the outcome: an abort would purge unsent records
        getattr(transactional, f"{outcome}_transaction")(30)
    seen += 3
    for i in range(5):
        plain.produce(topic, b"after-%d" % i, None, 0)
    plain.flush(30)
    return seen + 5


@pytest.fixture(scope="module")
def matrix_broker(tmp_path_factory):
    """A broker with topic ``matrix`` (1 partition, every shape of record) and ``spread`` (3
    partitions, 600 keyed records)."""
    home = tmp_path_factory.mktemp("console-fetch")
    with BrokerProcess(home=home / "home", log_dir=home / "data") as broker:
        bootstrap, env = broker.bootstrap_servers, broker.env
        assert bootstrap.startswith("127.0.0.1:"), bootstrap
        pylog("topics", "create", "matrix", "--bootstrap-server", bootstrap, env=env)
        pylog("topics", "create", "spread", "--partitions", "3", "--bootstrap-server", bootstrap, env=env)
        pylog(
            "topics",
            "create",
            "appended",
            "--config",
            "message.timestamp.type=LogAppendTime",
            "--bootstrap-server",
            bootstrap,
            env=env,
        )
        count = produce_matrix(bootstrap, "matrix")
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(600):
            producer.produce("spread", b"v%d" % i, b"k%d" % (i % 17))
        producer.flush(30)
        for i in range(30):
            producer.produce("appended", b"a%d" % i, None, 0, timestamp=1_000_000 + i)  # replaced by the broker's
            if i % 10 == 9:
                producer.flush(30)
        yield bootstrap, env, count


def both(bootstrap: str, env: dict, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The same consume through each fetcher."""
    return tuple(
        pylog("consume", *args, "--fetcher", fetcher, "--bootstrap-server", bootstrap, env=env)
        for fetcher in ("wire", "librdkafka")
    )


def processed(result: subprocess.CompletedProcess) -> bytes:
    return result.stderr.split(b"Processed a total of ")[1].split(b" messages")[0]


@pytest.mark.parametrize("output", OUTPUTS, ids=["values", "json", "format", "print-key"])
def test_every_output_of_the_whole_log_is_the_same_bytes_through_either_fetcher(matrix_broker, output):
    bootstrap, env, count = matrix_broker
    wire, librdkafka = both(bootstrap, env, "matrix", "--from-beginning", "-e", *output)
    assert wire.stdout == librdkafka.stdout
    assert processed(wire) == processed(librdkafka) == str(count).encode()
    if output == ("-J",):  # what the matrix holds came through: aborted records and markers did not
        text = wire.stdout.decode()
        assert '"value":"commit-2"' in text and "abort-" not in text and '"codec":"zstd"' in text
        assert '"key":"","value":""' in text and '"key":"k","value":null' in text


@pytest.mark.parametrize("count, output", [(3, ()), (23, ("-J",)), (37, ()), (61, ("-f", FORMAT))])
def test_max_messages_cutting_a_batch_prints_the_same_records(matrix_broker, count, output):
    bootstrap, env, _ = matrix_broker
    wire, librdkafka = both(bootstrap, env, "matrix", "--from-beginning", "-c", str(count), *output)
    assert wire.stdout == librdkafka.stdout
    assert processed(wire) == processed(librdkafka) == str(count).encode()


def test_several_partitions_give_the_same_records_and_one_partition_the_same_order(matrix_broker):
    bootstrap, env, _ = matrix_broker
    wire, librdkafka = both(bootstrap, env, "spread", "--from-beginning", "-e", "-J")
    assert sorted(wire.stdout.splitlines()) == sorted(librdkafka.stdout.splitlines())
    assert len(wire.stdout.splitlines()) == 600
    wire, librdkafka = both(bootstrap, env, "spread", "--from-beginning", "-e", "--partition", "1")
    assert wire.stdout == librdkafka.stdout and wire.stdout


def test_log_append_time_prints_the_brokers_timestamp_through_either_fetcher(matrix_broker):
    bootstrap, env, _ = matrix_broker
    for output in (("-J",), ("-f", FORMAT)):
        wire, librdkafka = both(bootstrap, env, "appended", "--from-beginning", "-e", *output)
        assert wire.stdout == librdkafka.stdout and len(wire.stdout.splitlines()) == 30
    timestamps = {int(line.split(b"|")[3]) for line in wire.stdout.splitlines()}
    assert min(timestamps) > 1_600_000_000_000 and len(timestamps) <= 3  # a batch's append time


def test_without_from_beginning_both_start_at_the_end(matrix_broker):
    bootstrap, env, _ = matrix_broker
    wire, librdkafka = both(bootstrap, env, "spread", "-e")
    assert wire.stdout == librdkafka.stdout == b""


def test_ctrl_c_stops_the_wire_reader_with_what_it_printed(matrix_broker):
    bootstrap, env, _ = matrix_broker
    unbuffered = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}  # each response is flushed
    printed, status, stderr = interrupted(
        ["consume", "appended", "--from-beginning", "--fetcher", "wire", "--bootstrap-server", bootstrap],
        30,
        unbuffered,
    )
    assert status == 130 and printed == [b"a%d\n" % i for i in range(30)]
    assert b"Processed a total of 30 messages" in stderr and b"Traceback" not in stderr


def test_a_broker_restart_hands_the_read_over_to_librdkafka_without_loss_or_repeat(pylog_broker_process):
    """The wire reader loses its connection: confluent-kafka's consumer reads on from each
    partition's next offset once the broker is back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    broker = pylog_broker_process(port=port)
    env, bootstrap = broker.env, ("--bootstrap-server", f"127.0.0.1:{port}")

    def restart_and_produce_more() -> None:
        broker.kill()
        broker.start()
        pylog("produce", "moving", *bootstrap, env=env, stdin=b"".join(b"r%d\n" % i for i in range(10, 20)))

    pylog("produce", "moving", *bootstrap, env=env, stdin=b"".join(b"r%d\n" % i for i in range(10)))
    printed, status, stderr = interrupted(
        ["consume", "moving", "--from-beginning", *bootstrap], 20, env, restart_and_produce_more, after=10
    )
    assert status == 130 and printed == [b"r%d\n" % i for i in range(20)], stderr
    assert b"Processed a total of 20 messages" in stderr and b"Traceback" not in stderr


def test_compiled_and_python_walks_print_the_same_values(matrix_broker, monkeypatch):
    """kafka_spark/cli/_console_values.c and its Python twin, batch by batch over the matrix."""
    if not cr.C_VALUES:
        pytest.skip("kafka_spark.cli._console_values is not built (python setup.py build_ext --inplace)")
    bootstrap, _, _ = matrix_broker
    from kafka_spark.client import fetch_client as kf

    client = kf.FetchClient(bootstrap, "test", 30)
    try:
        conn = client.connection(client.leader("matrix", 0))
        part = client.receive_fetch(
            conn,
            client.send_fetch(
                conn,
                "matrix",
                0,
                0,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=8 << 20,
                partition_max_bytes=8 << 20,
                isolation=0,
            ),
            "matrix",
            0,
        )
        data = bytes(part.records)
    finally:
        client.close()
    batches = [b for b in cr.scan(data) if not b.control]
    assert len(batches) >= 15
    for batch in batches:
        buf, start, end = cr.records_section(data, batch)
        python: list[bytes] = []
        assert cr.values(buf, start, end, python) == batch.count
        compiled, n = cr.lines(buf, start, end, -1)
        assert n == batch.count and compiled == b"".join(v + b"\n" for v in python)
        assert cr.lines(buf, start, end, 1) == (python[0] + b"\n", 1)
        with monkeypatch.context() as without_c:  # lines() where the extension is not built
            without_c.setattr(cr, "_c_values", None)
            assert cr.lines(buf, start, end, -1) == (compiled, n)
            assert cr.lines(buf, start, end, 1) == (python[0] + b"\n", 1)
    broken = bytearray(data[batches[0].position : batches[0].end])
    broken[cr.HEADER_SIZE + 5] = 0x7E  # the first record's value (63 bytes, it says) runs past its record
    with pytest.raises(ValueError, match="record 0 of the batch does not parse"):
        cr.lines(bytes(broken), cr.HEADER_SIZE, len(broken), -1)


def _record(offset_delta: int, key: bytes | None, value: bytes | None, headers: list[tuple[bytes, bytes]]) -> bytes:
    def varint(n: int) -> bytes:
        n = (n << 1) ^ (n >> 63)
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        return bytes(out + bytes([n]))

    def field(data: bytes | None) -> bytes:
        return varint(-1) if data is None else varint(len(data)) + data

    body = b"\x00" + varint(offset_delta * 3) + varint(offset_delta) + field(key) + field(value) + varint(len(headers))
    body += b"".join(field(name) + field(data) for name, data in headers)
    return varint(len(body)) + body


def test_mangled_records_never_crash_the_compiled_walk():
    """Random bytes changed in a records section: the C walk prints what the Python twin prints,
    or both refuse it with ValueError (never a read past the buffer)."""
    if not cr.C_VALUES:
        pytest.skip("kafka_spark.cli._console_values is not built (python setup.py build_ext --inplace)")
    import random

    rng = random.Random(17)
    section = b"".join(
        _record(
            i,
            None if i % 3 else b"k%d" % i,
            None if i % 7 == 3 else b"v" * rng.randrange(300),
            [(b"h", b"x")] if i % 5 == 0 else [],
        )
        for i in range(40)
    )
    for _ in range(3000):
        mangled = bytearray(section)
        for _ in range(rng.randrange(1, 4)):
            mangled[rng.randrange(len(mangled))] = rng.randrange(256)
        cut = bytes(mangled[: rng.randrange(len(mangled) + 1)] if rng.random() < 0.2 else mangled)
        try:
            compiled = cr.lines(cut, 0, len(cut), -1)
        except ValueError:
            compiled = None
        python: list[bytes] | None = []
        try:
            cr.values(cut, 0, len(cut), python)
        except (ValueError, IndexError):
            python = None
        if compiled is not None and python is not None:
            assert compiled == (b"".join(v + b"\n" for v in python), len(python))


def test_a_message_set_before_v2_is_left_to_librdkafka():
    legacy = (0).to_bytes(8, "big") + (60).to_bytes(4, "big") + bytes(4) + b"\x01" + bytes(55)  # magic 1
    with pytest.raises(cr.Unreadable) as raised:
        cr.scan(legacy)
    assert raised.value.offset == 0 and "format v1" in raised.value.why


def test_wire_fetcher_refuses_a_group(matrix_broker):
    bootstrap, env, _ = matrix_broker
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_spark.cli",
            "consume",
            "matrix",
            "--group",
            "g",
            "--fetcher",
            "wire",
            "--bootstrap-server",
            bootstrap,
        ],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1 and b"--fetcher wire reads without --group" in result.stderr


def test_the_compiled_walk_is_built_where_a_c_compiler_is_present():
    """The two tests above skip only on a machine without a C compiler: where one is present
    (CI's machines), the install must have built the extension, or they would pass vacuously."""
    import shutil
    import sysconfig

    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) on this machine: pylog consume uses its Python walk")
    assert cr.C_VALUES, (
        "a C compiler is present but kafka_spark.cli._console_values is not built: "
        "run `python setup.py build_ext --inplace` (make bootstrap does it)"
    )


def _old_broker(listener: socket.socket) -> None:
    """Answers every request as a broker that serves no API at all would answer ApiVersions v0
    (error 0, an empty list), on each connection, until the listener closes."""
    import struct
    import threading

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the client hangs up when it has read the list
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                correlation = body[4:8]
                answer = correlation + struct.pack(">hi", 0, 0)
                conn.sendall(struct.pack(">i", len(answer)) + answer)

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def test_wire_fetcher_advice_on_a_broker_without_fetch_v11_names_the_flag(matrix_broker):
    """The wire client's version check tells the console user the flag to use, not the source's
    option (a broker without Fetch v11 is read through librdkafka)."""
    import threading

    _, env, _ = matrix_broker
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    server = threading.Thread(target=_old_broker, args=(listener,), daemon=True)
    server.start()
    bootstrap = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kafka_spark.cli", "consume", "matrix", "-e", "--fetcher", "wire"]
            + ["--bootstrap-server", bootstrap],
            capture_output=True,
            env=env,
            timeout=120,
        )
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the server's accept (a close alone would not)
        listener.close()
        server.join(30)
        assert not server.is_alive()
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "does not serve Fetch v11" in stderr and "--fetcher librdkafka" in stderr, stderr
    assert "source option" not in stderr, stderr
