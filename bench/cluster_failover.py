"""The replicated cluster against the single node, and its failover time.

1. acks=all produce throughput (confluent-kafka, 100-byte records, one partition) into a 3-broker
   EmbeddedCluster (replication factor 3, min.insync.replicas 2) and into a single-node
   EmbeddedBroker, both in this process, rounds interleaved: the ratio is the cost of waiting for
   the followers' fetches on top of the leader's fsync.
2. Failover time: with one acks=all producer sending a record at a time, kill the partition's
   leader; the time from the kill to the first record acknowledged after it (by the new leader),
   over ``--kills`` kills (the killed broker is restarted and back in the ISR before the next).
   It is bounded below by the broker session timeout (``--session-timeout-ms``): the controller
   notices a crashed broker by its missing heartbeats.

    python bench/cluster_failover.py [--messages 50000] [--rounds 3] [--kills 20] [--session-timeout-ms 1000]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_spark import EmbeddedBroker, EmbeddedCluster  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Comparison, Results  # noqa: E402

VALUE = b"x" * 100


def produce_rate(bootstrap: str, topic: str, messages: int) -> float:
    """acks=all records/s of one producer sending ``messages`` records and flushing."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0})
    failed = []
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(
                    topic, VALUE, partition=0, on_delivery=lambda error, _: failed.append(error) if error else None
                )
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300) or failed:
        raise RuntimeError(f"{len(failed)} records failed, e.g. {failed[:1]}")
    return messages / (time.perf_counter() - start)


def throughput(messages: int, rounds: int) -> tuple[float, float]:
    cluster_rates, single_rates = [], []
    with tempfile.TemporaryDirectory(prefix="pylog-bench-cluster-") as data:
        with (
            EmbeddedCluster(brokers=3, log_dir=Path(data) / "cluster") as cluster,
            EmbeddedBroker(log_dir=Path(data) / "single") as single,
        ):
            for round_ in range(rounds):
                topic = f"bench-{round_}"
                cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": "2"})
                single.create_topic(topic)
                cluster_rates.append(produce_rate(cluster.bootstrap_servers, topic, messages))
                single_rates.append(produce_rate(single.bootstrap_servers, topic, messages))
                print(
                    f"round {round_ + 1}: cluster {cluster_rates[-1]:,.0f} msg/s  single {single_rates[-1]:,.0f} msg/s",
                    flush=True,
                )
    return cluster_rates, single_rates


def failover_times(kills: int, session_timeout_ms: int) -> list[float]:
    times = []
    with (
        tempfile.TemporaryDirectory(prefix="pylog-bench-failover-") as data,
        EmbeddedCluster(brokers=3, log_dir=data, broker_session_timeout_ms=session_timeout_ms) as cluster,
    ):
        cluster.create_topic("failover", replication_factor=3, config={"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0, "log_level": 0}
        )

        def send() -> float:
            """Produce one record; when it is acknowledged."""
            done: list = []
            producer.produce("failover", VALUE, partition=0, on_delivery=lambda error, _: done.append(error))
            while not done:
                producer.poll(0.005)
            if done[0] is not None:
                raise RuntimeError(f"a record failed: {done[0]}")
            return time.perf_counter()

        send()
        for kill in range(kills):
            leader = cluster.leader("failover")
            killed_at = time.perf_counter()
            cluster.kill_broker(leader)
            times.append(send() - killed_at)
            cluster.restart_broker(leader)
            cluster.wait_for_isr("failover", size=3)
            print(
                f"kill {kill + 1}: broker {leader}, first acknowledgement after {times[-1] * 1000:,.0f} ms", flush=True
            )
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--session-timeout-ms", type=int, default=1_000)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (bench/plot.py draws them)")
    args = parser.parse_args()
    results = Results("cluster_failover", {key: value for key, value in vars(args).items() if key != "json"})
    cluster_rates, single_rates = throughput(args.messages, args.rounds)
    cluster_rate, single_rate = statistics.median(cluster_rates), statistics.median(single_rates)
    results.add(
        Comparison.rates(
            "cluster-produce",
            f"acks=all produce, {args.messages:,} records of 100 bytes, one partition",
            {"3 brokers, rf 3": cluster_rates, "1 broker": single_rates},
            "3 brokers / 1",
            "produce",
            unit="msg/s",
        )
    )
    print(
        f"acks=all produce  cluster(3 brokers, rf 3) {cluster_rate:,.0f} msg/s  single node {single_rate:,.0f} msg/s  "
        f"ratio cluster/single {cluster_rate / single_rate:.2f}"
    )
    times = sorted(failover_times(args.kills, args.session_timeout_ms))
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    print(
        f"failover (leader killed -> first acks=all produce acknowledged)  kills {len(times)}  "
        f"p50 {statistics.median(times) * 1000:,.0f} ms  p95 {p95 * 1000:,.0f} ms  "
        f"broker.session.timeout.ms {args.session_timeout_ms}"
    )
    results.add(
        Comparison(
            id="cluster-failover",
            title=f"leader killed -> first acks=all record acknowledged, {len(times)} kills",
            unit="ms",
            better="lower",
            groups=[f"broker.session.timeout.ms={args.session_timeout_ms}"],
            series={"3-broker cluster": [[t * 1000 for t in times]]},
        )
    )
    if args.json:
        results.write(args.json)
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
