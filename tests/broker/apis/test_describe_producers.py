"""DescribeProducers (61) and WriteTxnMarkers (27) as kafka-transactions' describe-producers,
find-hanging and abort use them on a single node: the producer state survives a restart (rebuilt
from the log, the coordinator epoch read from the last marker), errors are Kafka's, and both APIs
are refused without the ACLs Kafka asks for. (The same tools against Apache Kafka and pylog:
tests/interop/test_kafka_tools.py; followers on a cluster: tests/broker/cluster/test_transactions.py.)"""

from __future__ import annotations

from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.wire import WireClient

TOPIC = "ledger"


def describe(bootstrap: str, topic: str = TOPIC, partitions: tuple[int, ...] = (0,)) -> list[tuple[int, list[tuple]]]:
    """Per partition asked: (error code, [(epoch, last sequence, coordinator epoch, txn start)])."""
    with WireClient(bootstrap) as client:
        answer = client.call(61, 0, {"topics": [{"name": topic, "partition_indexes": list(partitions)}]})
    (topic_answer,) = answer.topics
    assert topic_answer.name == topic
    return [
        (
            int(partition.error_code),
            [
                (p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
                for p in partition.active_producers
            ],
        )
        for partition in topic_answer.partitions
    ]


def abort_marker(bootstrap: str, producer_id: int, producer_epoch: int) -> int:
    """WriteTxnMarkers v1 as AdminClient.abortTransaction sends it; the partition's error code."""
    with WireClient(bootstrap) as client:
        answer = client.call(
            27,
            1,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": False,
                        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
        )
    return int(answer.markers[0].topics[0].partitions[0].error_code)


def last_stable_offset(bootstrap: str) -> int:
    """ListOffsets of the latest offset for read_committed (isolation level 1): the LSO."""
    with WireClient(bootstrap) as client:
        answer = client.call(
            2,
            5,
            {
                "replica_id": -1,
                "isolation_level": 1,
                "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
                ],
            },
        )
    return int(answer.topics[0].partitions[0].offset)


def test_producers_and_open_transactions_survive_a_restart_and_abort_ends_one(tmp_path):
    with EmbeddedBroker(tmp_path, register=False) as broker:
        broker.create_topic(TOPIC, partitions=1)
        plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
        for index in range(3):
            plain.produce(TOPIC, b"plain-%d" % index, partition=0)
        assert plain.flush(30) == 0
        committed = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "committed"})
        committed.init_transactions(30)
        committed.begin_transaction()
        committed.produce(TOPIC, b"committed", partition=0)
        committed.commit_transaction(30)
        left_open = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "left-open"})
        left_open.init_transactions(30)
        left_open.begin_transaction()
        for index in range(2):
            left_open.produce(TOPIC, b"open-%d" % index, partition=0)
        assert left_open.flush(30) == 0
        # offsets: 0-2 plain, 3 committed, 4 its COMMIT marker, 5-6 the open transaction
        expected = [(0, [(0, 2, -1, -1), (0, 0, 0, -1), (0, 1, -1, 5)])]
        assert describe(broker.bootstrap_servers) == expected
        with WireClient(broker.bootstrap_servers) as client:  # the producer ids, in the same order
            answer = client.call(61, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]})
        open_id = answer.topics[0].partitions[0].active_producers[2].producer_id

    with EmbeddedBroker(tmp_path, register=False) as broker:  # rebuilt from the log's batch headers
        assert describe(broker.bootstrap_servers) == expected
        assert abort_marker(broker.bootstrap_servers, open_id, 0) == 0
        assert describe(broker.bootstrap_servers) == [(0, [(0, 2, -1, -1), (0, 0, 0, -1), (0, 1, 0, -1)])]
        assert last_stable_offset(broker.bootstrap_servers) == 8  # the ABORT marker is at 7


def test_unknown_topics_and_partitions_are_named_as_kafka_names_them(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    assert describe(pylog_broker.bootstrap_servers, topic, (0, 1, 2)) == [(0, []), (0, []), (3, [])]
    assert describe(pylog_broker.bootstrap_servers, "no-such-topic") == [(3, [])]  # UNKNOWN_TOPIC_OR_PARTITION


def test_describing_producers_needs_read_on_the_topic_and_markers_need_cluster_action(tmp_path, pylog_broker_factory):
    broker = pylog_broker_factory(
        log_dir=tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    )
    broker.create_topic(TOPIC, partitions=1)
    # No ACL names User:ANONYMOUS, this PLAINTEXT client.
    assert describe(broker.bootstrap_servers) == [(29, [])]  # TOPIC_AUTHORIZATION_FAILED
    assert abort_marker(broker.bootstrap_servers, 0, 0) == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert broker.broker.logs.get_log(TOPIC, 0).log_end_offset == 0  # nothing was written
