"""The single-node broker's leader epochs: a new epoch at every start, beginning at the recovered
log end offset, kept in each partition's leader-epoch-checkpoint, stamped into batches, reported
by Metadata and ListOffsets, and answered by OffsetForLeaderEpoch (advertised), as a KRaft
broker that restarts. A tail lost in a crash is told from the records written since."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.storage.batch import validate_batches
from kafka_spark.broker.storage.epochs import CHECKPOINT_FILE
from tests.support.wire import WireClient  # noqa: E402

TOPIC = "epochs"
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


def _produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i + b"." * 50, partition=0)
        assert producer.flush(30) == 0  # one batch each


def _metadata_epoch(client: WireClient) -> int:
    response = client.call(
        3,
        9,
        {
            "topics": [{"name": TOPIC}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    return int(response.topics[0].partitions[0].leader_epoch)


def _latest(client: WireClient) -> tuple[int, int]:
    error, offset, epoch = _list_offsets(client, -1)
    assert error == 0
    return offset, epoch


def _list_offsets(client: WireClient, timestamp: int, current: int = -1) -> tuple[int, int, int]:
    """(error code, offset, leader epoch) of ListOffsets v4 for partition 0."""
    response = client.call(
        2,
        4,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"partition_index": 0, "current_leader_epoch": current, "timestamp": timestamp}],
                }
            ],
        },
    )
    answer = response.topics[0].partitions[0]
    return int(answer.error_code), int(answer.offset), int(answer.leader_epoch)


def _epoch_end(client: WireClient, epoch: int, current: int = -1) -> tuple[int, int, int]:
    response = client.call(
        23,
        4,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [{"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}],
                }
            ],
        },
    )
    answer = response.topics[0].partitions[0]
    return int(answer.error_code), int(answer.leader_epoch), int(answer.end_offset)


def test_each_start_leads_in_a_new_epoch_that_clients_see_and_offset_for_leader_epoch_answers(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        _produce(broker.bootstrap_servers, 3)
        with WireClient(broker.bootstrap_servers) as client:
            assert _metadata_epoch(client) == 0 and _latest(client) == (3, 0)
            versions = client.call(18, 0, {})
            assert 23 in {entry.api_key for entry in versions.api_keys}  # advertised on a single node too
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        _produce(broker.bootstrap_servers, 2)
        with WireClient(broker.bootstrap_servers) as client:
            assert _metadata_epoch(client) == 1 and _latest(client) == (5, 1)
            assert _epoch_end(client, 0) == (0, 0, 3)  # epoch 0 ended where this start began
            assert _epoch_end(client, 1, current=1) == (0, 1, 5)
            assert _epoch_end(client, 1, current=0)[0] == FENCED_LEADER_EPOCH
            assert _epoch_end(client, 1, current=2)[0] == UNKNOWN_LEADER_EPOCH
        log = broker.broker.logs.get_log(TOPIC, 0)
        data = bytes(log.read(0, 1 << 20, max_offset=log.log_end_offset))
        assert [h.partition_leader_epoch for h in validate_batches(data, 1 << 20)] == [0, 0, 0, 1, 1]
    assert (tmp_path / f"{TOPIC}-0" / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n1 3\n"


def test_a_tail_lost_in_a_crash_ends_its_epoch_where_the_recovered_log_ends(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        _produce(broker.bootstrap_servers, 2)
    with EmbeddedBroker(log_dir=tmp_path) as broker:  # epoch 1 from offset 2
        _produce(broker.bootstrap_servers, 4)
    segment = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))[-1]
    size = segment.stat().st_size
    with open(segment, "r+b") as handle:  # keep 3 of the 6 equal batches, and half of the 4th
        handle.truncate(size // 6 * 3 + size // 12)
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            assert _latest(client) == (3, 2)  # epoch 2, never 1 again: the lost tail's epoch
            assert _epoch_end(client, 1) == (0, 1, 3)  # epoch 1 now ends at 3, not 6
            assert _epoch_end(client, 0) == (0, 0, 2)


def test_list_offsets_fences_a_client_whose_current_leader_epoch_is_not_the_brokers(tmp_path: Path) -> None:
    """KIP-320, as Fetch and OffsetForLeaderEpoch: ListOffsets v4+ with the client's current leader
    epoch answers FENCED_LEADER_EPOCH for an older one, UNKNOWN_LEADER_EPOCH for a newer one; -1
    (not given) and the broker's own are answered, and so are confluent-kafka's lookups."""
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        _produce(broker.bootstrap_servers, 2)
    with EmbeddedBroker(log_dir=tmp_path) as broker:  # leads in epoch 1 now
        with WireClient(broker.bootstrap_servers) as client:
            assert _list_offsets(client, -1, current=1) == (0, 2, 1)
            assert _list_offsets(client, -1, current=-1) == (0, 2, 1)
            for timestamp in (-1, -2, 0):  # latest, earliest, a timestamp
                assert _list_offsets(client, timestamp, current=0) == (FENCED_LEADER_EPOCH, -1, -1)
                assert _list_offsets(client, timestamp, current=2) == (UNKNOWN_LEADER_EPOCH, -1, -1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        partition = TopicPartition(TOPIC, 0)
        for spec, expected in ((OffsetSpec.latest(), 2), (OffsetSpec.earliest(), 0)):
            answer = admin.list_offsets({partition: spec}, request_timeout=10)[partition].result(30)
            assert (answer.offset, answer.leader_epoch) == (expected, 1)
