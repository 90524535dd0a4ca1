"""The broker's hot paths at current protocol versions against Kafka 2.3's, side by side in one run.

kcat (bench/broker_throughput.py) links librdkafka 2.0, which speaks Produce v7 and Fetch v11:
it never reaches the flexible versions (KIP-482) current clients use. This measures them:

- codec: the broker's hand-written Produce request reader and Fetch response writer, per request,
  at the version librdkafka 2.0 sends (Produce v7, Fetch v11), the one librdkafka 2.16 sends
  (v10, v16) and Kafka 4's Java client's (v13, v18): 16 partitions of 64 KiB record sets, and
  one partition of 1 KiB;
- end to end: confluent-kafka (librdkafka 2.16) producing and consuming 100-byte messages through
  the embedded broker at the versions it negotiates (Produce v10, Fetch v16), and the same client
  held to Kafka 2.3's versions (``api.version.request=false``, ``broker.version.fallback=2.3.0``:
  Produce v7, Fetch v11), rounds interleaved.

Prints each figure and the ratio current/old (>= 1.0: the current versions are at least as fast).
Usage: python bench/protocol_versions.py [--messages 300000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import datetime
import io
import statistics
import struct
import sys
import time
import uuid

from kio.index import load_request_schema
from kio.serial import entity_writer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.protocol import codec
from kafka_spark.broker.protocol.codec import Request, decode_request

CURRENT = {"librdkafka 2.16": (10, 16), "Kafka 4 Java": (13, 18)}
OLD = (7, 11)


def produce_frame(version: int, partitions: int, size: int) -> bytes:
    cls = load_request_schema(0, version)
    module = sys.modules[cls.__module__]
    topic = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": "orders"}
    body = cls(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            module.TopicProduceData(
                **topic,
                partition_data=tuple(
                    module.PartitionProduceData(index=p, records=bytes(size)) for p in range(partitions)
                ),
            ),
        ),
    )
    out = io.BytesIO()
    out.write(struct.pack(">hhih", 0, version, 1, 3) + b"rdk" + (b"\0" if version >= 9 else b""))
    entity_writer(cls)(out, body)
    return out.getvalue()


def fetch_response(partitions: int, size: int) -> dict:
    records = memoryview(bytes(size))
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition_index": p,
                        "error_code": 0,
                        "high_watermark": 10**6,
                        "last_stable_offset": 10**6,
                        "log_start_offset": 0,
                        "aborted_transactions": (),
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                    for p in range(partitions)
                ],
            }
        ],
    }


def per_call(function, seconds: float = 0.1) -> float:
    """Seconds per call over about ``seconds``."""
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        function()
        count += 1
    return (time.perf_counter() - start) / count


def paired(old, current, pairs: int = 9) -> tuple[float, float, float]:
    """Median seconds per call of each, and the median of the per-pair ratios old/current: the
    two run in turn, so the machine's speed drifting between pairs cancels out."""
    olds, currents = [], []
    for _ in range(pairs):
        olds.append(per_call(old))
        currents.append(per_call(current))
    return (
        statistics.median(olds),
        statistics.median(currents),
        statistics.median(o / c for o, c in zip(olds, currents, strict=True)),
    )


def codec_figures() -> None:
    print(
        "codec, microseconds per request (lower is better); median ratio old/current of 9 interleaved pairs "
        "(>= 1.0: current no slower)"
    )
    for partitions, size in ((16, 64 * 1024), (1, 1024)):
        old_produce = produce_frame(OLD[0], partitions, size)
        old_request = Request(1, OLD[1], 1, "c", object())
        response = fetch_response(partitions, size)
        for client, (produce_version, fetch_version) in CURRENT.items():
            frame = produce_frame(produce_version, partitions, size)
            request = Request(1, fetch_version, 1, "c", object())
            # each lambda binds this iteration's values (default arguments cost nothing per call)
            old_decode, decode, read_ratio = paired(
                lambda frame=old_produce: decode_request(frame), lambda frame=frame: decode_request(frame)
            )
            old_encode, encode, write_ratio = paired(
                lambda request=old_request, response=response: codec.encode_response_parts(request, response),
                lambda request=request, response=response: codec.encode_response_parts(request, response),
            )
            print(
                f"  {partitions:2d} x {size // 1024:2d} KiB  {client:16s} Produce v{produce_version} read "
                f"{decode * 1e6:7.1f} vs v{OLD[0]} {old_decode * 1e6:7.1f}  ratio {read_ratio:4.2f}   "
                f"Fetch v{fetch_version} write {encode * 1e6:7.1f} vs v{OLD[1]} {old_encode * 1e6:7.1f}  "
                f"ratio {write_ratio:4.2f}"
            )


def end_to_end(bootstrap: str, topic: str, messages: int, legacy: bool) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    pinned = {"api.version.request": False, "broker.version.fallback": "2.3.0"} if legacy else {}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000, **pinned})
    value = b"x" * 100
    start = time.perf_counter()
    for index in range(messages):
        while True:
            try:
                producer.produce(topic, value, partition=index % 4)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produced = messages / (time.perf_counter() - start)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
            **pinned,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    seen, start = 0, time.perf_counter()
    while seen < messages:
        seen += sum(1 for message in consumer.consume(10_000, 1.0) if not message.error())
    consumed = messages / (time.perf_counter() - start)
    consumer.close()
    return produced, consumed


def end_to_end_figures(messages: int, rounds: int) -> None:
    ratios: dict[str, list[float]] = {"produce": [], "consume": []}
    figures: dict[tuple[str, bool], list[float]] = {}
    with EmbeddedBroker(register=False) as broker:
        for round_index in range(rounds):
            for legacy in (False, True):
                topic = f"bench-{round_index}-{legacy}"
                broker.create_topic(topic, partitions=4)
                produced, consumed = end_to_end(broker.bootstrap_servers, topic, messages, legacy)
                figures.setdefault(("produce", legacy), []).append(produced)
                figures.setdefault(("consume", legacy), []).append(consumed)
                broker.delete_topic(topic)
            for phase in ratios:
                ratios[phase].append(figures[(phase, False)][-1] / figures[(phase, True)][-1])
    print(f"end to end, confluent-kafka {messages:,} x 100 B, median of {rounds} interleaved rounds (msgs/s)")
    for phase in ("produce", "consume"):
        print(
            f"  {phase:8s} Produce v10/Fetch v16 {statistics.median(figures[(phase, False)]):10,.0f}   "
            f"v7/v11 {statistics.median(figures[(phase, True)]):10,.0f}   ratio current/old "
            f"{statistics.median(ratios[phase]):4.2f} (rounds {min(ratios[phase]):.2f} to {max(ratios[phase]):.2f})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    codec_figures()
    end_to_end_figures(args.messages, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
