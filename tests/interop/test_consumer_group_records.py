"""Kafka 4.3.1's own decoder (``kafka-dump-log --offsets-decoder``, Kafka's GroupCoordinatorRecordSerde)
reads the records pylog's coordinator writes to ``__consumer_offsets`` for a group of the consumer
protocol (KIP-848): the member's metadata, the group's epochs, target and current assignments,
and the tombstones of a member that left, in Kafka's order (the current assignment with each
partition's assignment epoch, KIP-1251); the metadata of a classic member
of a consumer group (KIP-848's migration), with its tagged ClassicMemberMetadata; and a classic
group's GroupMetadata record (Stable, Empty, its tombstone)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path
from typing import Any

from kafka_spark.broker import EmbeddedBroker
from tests.broker.coordinator.test_consumer_group import TOPIC, Member
from tests.broker.coordinator.test_group_migration import Place, classic_group, subscription
from tests.broker.coordinator.test_group_protocol import LEAVE_GROUP, stable_member
from tests.interop.references import ToolRunner, kafka_tool
from tests.support.wire import WireClient

_RECORD = re.compile(r"key: (\{.*\}) payload: (<DELETE>|\{.*\})$")


def test_kafkas_decoder_reads_the_consumer_groups_records_pylog_writes(tmp_path, tool_runner: ToolRunner) -> None:
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic(TOPIC, partitions=2)
        stays, leaves = Member(broker, "stays"), Member(broker, "leaves")
        assert stays.join().error_code == 0 and leaves.join().error_code == 0
        assert leaves.heartbeat(member_epoch=-1).error_code == 0
        assert stays.heartbeat(owned=stays.owned).error_code == 0
        stays.close()
        leaves.close()
        topic_id = broker.broker.logs.topic_info(TOPIC).topic_id
    records = _dumped(tmp_path, tool_runner)
    assert [(kind, member, value is None) for kind, member, value in records] == [
        (5, "stays", False),  # stays joins: its metadata, the group's partitions and epoch 1,
        (4, None, False),
        (3, None, False),
        (7, "stays", False),  # its target, the assignment epoch, its current assignment
        (6, None, False),
        (8, "stays", False),
        (5, "leaves", False),  # leaves joins: epoch 2, both targets move
        (3, None, False),
        (7, "leaves", False),
        (7, "stays", False),
        (6, None, False),
        (8, "leaves", False),
        (8, "leaves", True),  # leaves goes: Kafka's tombstones, then epoch 3
        (7, "leaves", True),
        (5, "leaves", True),
        (3, None, False),
        (7, "stays", False),  # stays takes everything back at epoch 3
        (6, None, False),
        (8, "stays", False),
    ]
    assert records[-1][2] == {
        "version": "0",
        "data": {
            "memberEpoch": 3,
            "previousMemberEpoch": 1,
            "state": 0,
            # KIP-1251's tagged assignment epochs: stays has held both partitions since epoch 1
            "assignedPartitions": [{"topicId": _base64(topic_id), "partitions": [0, 1], "assignmentEpochs": [1, 1]}],
            "partitionsPendingRevocation": [],
        },
    }
    assert records[0][2] is not None and records[0][2]["data"]["subscribedTopicNames"] == [TOPIC]


def test_kafkas_decoder_reads_a_classic_members_metadata_pylog_writes(tmp_path, tool_runner: ToolRunner) -> None:
    """A classic member of a consumer group (a classic group converted when a consumer-protocol
    member joined it) carries Kafka's ClassicMemberMetadata, the tagged field 0 of its metadata
    record: its session timeout and protocols."""
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic(TOPIC, partitions=6)
        place = Place(broker)
        classic = classic_group(place)
        modern = place.modern("modern")
        assert modern.join().error_code == 0
        classic.close()
        modern.close()
    members = {
        member: value["data"]
        for kind, member, value in _dumped(tmp_path, tool_runner)
        if kind == 5 and value is not None
    }
    assert set(members) == {classic.member_id, "modern"}
    assert "classicMemberMetadata" not in members["modern"]  # null: a member of the consumer protocol
    assert members[classic.member_id]["classicMemberMetadata"] == {
        "sessionTimeoutMs": 6000,
        "supportedProtocols": [{"name": "cooperative-sticky", "metadata": base64.b64encode(subscription()).decode()}],
    }


def test_kafkas_decoder_reads_a_classic_groups_records_pylog_writes(tmp_path, tool_runner: ToolRunner) -> None:
    """A classic group's GroupMetadata record (version 3, as Kafka 4.3 writes it): written Stable
    by the leader's SyncGroup with the member's subscription and assignment, Empty (the next
    generation, no members) when its member left, and tombstoned when the group is deleted."""
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker, WireClient(broker.bootstrap_servers) as client:
        member_id, generation = stable_member(client, "g")
        left = client.call(LEAVE_GROUP, 3, {"group_id": "g", "members": [{"member_id": member_id}]})
        assert left.error_code == 0
        assert int(client.call(42, 2, {"groups_names": ["g"]}).results[0].error_code) == 0  # DeleteGroups
    records = [value for kind, _, value in _dumped(tmp_path, tool_runner) if kind == 2]
    assert len(records) == 3 and records[2] is None, records
    stable, empty = records[0], records[1]
    assert stable is not None and empty is not None
    assert stable["version"] == empty["version"] == "3"
    (member,) = stable["data"]["members"]
    assert {key: stable["data"][key] for key in ("protocolType", "generation", "protocol", "leader")} == {
        "protocolType": "consumer",
        "generation": generation,
        "protocol": "range",
        "leader": member_id,
    }
    assert stable["data"]["currentStateTimestamp"] > 0
    assert (member["memberId"], member["groupInstanceId"], member["sessionTimeout"], member["rebalanceTimeout"]) == (
        member_id,
        None,
        6000,
        6000,
    )
    assert (member["subscription"], member["assignment"]) == (
        base64.b64encode(b"range").decode(),
        base64.b64encode(b"mine").decode(),
    )
    assert {key: empty["data"][key] for key in ("protocolType", "generation", "protocol", "leader", "members")} == {
        "protocolType": "consumer",
        "generation": generation + 1,
        "protocol": None,
        "leader": None,
        "members": [],
    }


def _dumped(log_dir: Path, tool_runner: ToolRunner) -> list[tuple[int, str | None, Any]]:
    """The records of the one group's partition of ``__consumer_offsets`` as Kafka's decoder
    prints them: (record type, member id, JSON value or None for a tombstone)."""
    segments = [str(path) for path in sorted(log_dir.glob("__consumer_offsets-*/*.log")) if path.stat().st_size]
    assert len(segments) == 1, segments  # one group, one partition
    dumped = kafka_tool("kafka-dump-log", "--offsets-decoder", "--files", segments[0], runner=tool_runner).stdout
    records = []
    for line in dumped.splitlines():
        found = _RECORD.search(line)
        if found:
            key = json.loads(found.group(1))
            value = None if found.group(2) == "<DELETE>" else json.loads(found.group(2))
            records.append((int(key["type"]), key["data"].get("memberId"), value))
    return records


def _base64(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka's JSON prints it."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
