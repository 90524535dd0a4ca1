"""Kafka's own command-line tools (Apache Kafka 4.3, run by main class) against pylog's broker,
each test run the same way against Apache Kafka as the reference: what the tools print and do
must be the same on both. Known differences (features, configs and APIs pylog does not have) are
listed in the README under "Tested against"."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from confluent_kafka import Producer

from tests.interop.harness import BASE_TS, Cluster, table
from tests.support.partition_reads import read_to_end
from tests.support.waiting import wait_until


def consume(cluster: Cluster, topic: str, count: int, *args: str) -> list[str]:
    result = cluster.tool(
        "kafka-console-consumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "60000",
        *args,
    )
    assert f"Processed a total of {count} messages" in result.stderr, result.stderr
    return result.stdout.splitlines()


def test_console_producer_and_consumer_carry_keys_headers_and_partitions(cluster: Cluster):
    topic = cluster.topic(partitions=3)
    lines = "h1:v1,h2:v2\tk1\tvalue-one\nh3:v3\tk2\tvalue-two\nh4:\tk3\tvalue-three\n"
    cluster.tool(
        "kafka-console-producer",
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "parse.headers=true",
        input=lines,
    )
    printed = consume(
        cluster,
        topic,
        3,
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.headers=true",
        "--formatter-property",
        "print.partition=true",
    )
    # Kafka's Java producer puts keyed records by murmur2 of the key: the same partitions on both.
    assert sorted(printed) == sorted(
        [
            "Partition:2\th1:v1,h2:v2\tk1\tvalue-one",
            "Partition:0\th3:v3\tk2\tvalue-two",
            "Partition:1\th4:\tk3\tvalue-three",
        ]
    )


def test_topics_create_describe_alter_list_and_delete(cluster: Cluster):
    topic = f"topics-tool-{cluster.name}-{int(time.time() * 1000)}"
    created = cluster.tool(
        "kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--config", "retention.ms=3600000"
    )
    assert created.stdout.strip() == f"Created topic {topic}."
    again = cluster.tool("kafka-topics", "--create", "--topic", topic, "--partitions", "2", check=False)
    assert again.returncode != 0 and "TopicExistsException" in again.stdout + again.stderr
    assert cluster.tool("kafka-topics", "--create", "--topic", topic, "--if-not-exists").returncode == 0

    described = cluster.tool("kafka-topics", "--describe", "--topic", topic).stdout
    # The topic id (Metadata v10+, DescribeTopicPartitions) and the eligible leader replicas
    # (KIP-966), empty on a single node.
    header = re.search(
        rf"Topic: {topic}\tTopicId: ([A-Za-z0-9_-]{{22}})\tPartitionCount: 2\tReplicationFactor: 1\t"
        r"Configs: .*retention.ms=3600000",
        described,
    )
    assert header and header.group(1) != "AAAAAAAAAAAAAAAAAAAAAA", described
    assert re.findall(
        r"Partition: (\d+)\tLeader: \d+\tReplicas: \d+\tIsr: \d+\tElr: \tLastKnownElr: $", described, re.MULTILINE
    ) == ["0", "1"], described

    cluster.tool("kafka-topics", "--alter", "--topic", topic, "--partitions", "3")
    # the same id after the alter (Kafka's brokers show it once its metadata record reaches them)
    wait_until(
        lambda: (
            f"TopicId: {header.group(1)}\tPartitionCount: 3"
            in cluster.tool("kafka-topics", "--describe", "--topic", topic).stdout
        ),
        f"{topic} described with 3 partitions and its id",
        interval=0.5,
    )
    fewer = cluster.tool("kafka-topics", "--alter", "--topic", topic, "--partitions", "2", check=False)
    assert fewer.returncode != 0 and "InvalidPartitionsException" in fewer.stdout + fewer.stderr

    assert topic in cluster.tool("kafka-topics", "--list").stdout.split()
    cluster.tool("kafka-topics", "--delete", "--topic", topic)
    wait_until(  # Kafka deletes asynchronously
        lambda: topic not in cluster.tool("kafka-topics", "--list").stdout.split(), f"{topic} unlisted", interval=0.5
    )
    missing = cluster.tool("kafka-topics", "--describe", "--topic", topic, check=False)
    assert missing.returncode != 0 and "does not exist" in missing.stdout + missing.stderr
    assert cluster.tool("kafka-topics", "--describe", "--topic", topic, "--if-exists").returncode == 0


def _described_when(cluster: Cluster, entity: tuple[str, ...], shows: Callable[[str], bool]) -> str:
    """kafka-configs --describe's output, asked again until ``shows`` it (Kafka's brokers apply an
    alter when its metadata record reaches them)."""

    def described() -> str:
        out = cluster.tool("kafka-configs", *entity, "--describe").stdout
        return out if shows(out) else ""

    return wait_until(described, f"kafka-configs --describe {' '.join(entity)}", interval=0.5)


def test_configs_add_describe_and_delete_topic_configs(cluster: Cluster):
    topic = cluster.topic()
    entity = ("--entity-type", "topics", "--entity-name", topic)
    altered = cluster.tool(
        "kafka-configs", *entity, "--alter", "--add-config", "retention.ms=86400000,cleanup.policy=compact"
    )
    assert altered.stdout.strip() == f"Completed updating config for topic {topic}."
    # shown once the change's metadata record reaches the broker answering
    described = _described_when(cluster, entity, lambda out: "retention.ms" in out)
    assert f"Dynamic configs for topic {topic} are:" in described
    assert re.search(
        r"^\s+cleanup.policy=compact sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact",
        described,
        re.MULTILINE,
    ), described
    assert re.search(r"^\s+retention.ms=86400000 sensitive=false", described, re.MULTILINE), described

    every = cluster.tool("kafka-configs", *entity, "--describe", "--all").stdout
    for default in ("segment.bytes=1073741824", "max.message.bytes=1048588", "min.compaction.lag.ms=0"):
        assert re.search(rf"^\s+{re.escape(default)} sensitive=false", every, re.MULTILINE), (default, every)

    cluster.tool("kafka-configs", *entity, "--alter", "--delete-config", "cleanup.policy")
    described = _described_when(cluster, entity, lambda out: "cleanup.policy" not in out)
    assert "retention.ms=86400000" in described
    bad = cluster.tool("kafka-configs", *entity, "--alter", "--add-config", "retention.ms=soon", check=False)
    assert bad.returncode != 0 and "retention.ms" in bad.stdout + bad.stderr


def test_configs_manage_scram_users_and_describe_client_quotas(cluster: Cluster):
    """kafka-configs on users: SCRAM credentials are added, shown with the user's quotas (none
    here) and deleted; a user's two credentials in one request are refused, as Kafka refuses them."""
    user = f"user-{cluster.topic()}"
    users = ("--entity-type", "users", "--entity-name", user)
    added = cluster.tool(
        "kafka-configs", *users, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=secret-1]"
    )
    assert added.stdout.strip() == f"Completed updating config for user {user}."
    shown = f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192"
    assert cluster.tool("kafka-configs", *users, "--describe").stdout.strip() == shown
    assert shown in cluster.tool("kafka-configs", "--entity-type", "users", "--describe").stdout.splitlines()
    for entity in (
        ("--entity-type", "clients", "--entity-name", "app"),
        ("--entity-type", "users", "--entity-default"),
    ):
        described = cluster.tool("kafka-configs", *entity, "--describe")  # no quota is set
        assert described.stdout.strip() == "", described.stdout
    both = cluster.tool(
        "kafka-configs",
        *users,
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[password=secret-2],SCRAM-SHA-512=[password=secret-2]",
        check=False,
    )
    assert both.returncode != 0 and "DuplicateResourceException" in both.stdout + both.stderr
    assert cluster.tool("kafka-configs", *users, "--describe").stdout.strip() == shown  # nothing changed
    cluster.tool("kafka-configs", *users, "--alter", "--delete-config", "SCRAM-SHA-256")
    assert cluster.tool("kafka-configs", *users, "--describe").stdout.strip() == ""


def test_reassign_partitions_lists_no_reassignment_in_progress(cluster: Cluster):
    listed = cluster.tool("kafka-reassign-partitions", "--list")
    assert listed.stdout.strip() == "No partition reassignments found."


def test_consumer_groups_describe_reset_offsets_and_delete(cluster: Cluster):
    topic = cluster.topic(partitions=2)
    cluster.tool(
        "kafka-console-producer",
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        input="".join(f"key{i}\tvalue{i}\n" for i in range(10)),
    )
    group = f"tools-group-{cluster.name}"
    consume(cluster, topic, 10, "--group", group)  # commits its position when it closes

    rows = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)
    assert sorted(row["PARTITION"] for row in rows) == ["0", "1"]
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] and row["LAG"] == "0" for row in rows), rows
    assert sum(int(row["LOG-END-OFFSET"]) for row in rows) == 10
    assert group in cluster.tool("kafka-consumer-groups", "--list").stdout.split()
    state = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group, "--state").stdout)
    assert [(row["GROUP"], row["STATE"], row["#MEMBERS"]) for row in state] == [(group, "Empty", "0")]
    # --list with states and types (ListGroups v4/v5): other tests' groups may be listed too.
    listed = table(cluster.tool("kafka-consumer-groups", "--list", "--state").stdout)
    assert [row["STATE"] for row in listed if row["GROUP"] == group] == ["Empty"], listed
    listed = table(cluster.tool("kafka-consumer-groups", "--list", "--type").stdout)
    assert [row["TYPE"] for row in listed if row["GROUP"] == group] == ["Classic"], listed
    assert group in [
        row["GROUP"] for row in table(cluster.tool("kafka-consumer-groups", "--list", "--state", "Empty").stdout)
    ]
    assert group not in [
        row["GROUP"] for row in table(cluster.tool("kafka-consumer-groups", "--list", "--state", "Stable").stdout)
    ]
    assert group not in [
        row["GROUP"] for row in table(cluster.tool("kafka-consumer-groups", "--list", "--type", "consumer").stdout)
    ]

    dry = table(
        cluster.tool(
            "kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"
        ).stdout
    )
    assert sorted((row["PARTITION"], row["NEW-OFFSET"]) for row in dry) == [("0", "0"), ("1", "0")]
    still = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)
    assert all(row["LAG"] == "0" for row in still)  # a dry run commits nothing
    cluster.tool(
        "kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
    )
    rows = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)
    assert all(row["CURRENT-OFFSET"] == "0" and row["LAG"] == row["LOG-END-OFFSET"] for row in rows), rows
    cluster.tool(
        "kafka-consumer-groups",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:1",
        "--to-offset",
        "1",
        "--execute",
    )
    cluster.tool(
        "kafka-consumer-groups",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:0",
        "--shift-by",
        "2",
        "--execute",
    )
    rows = {
        row["PARTITION"]: row
        for row in table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)
    }
    assert (rows["0"]["CURRENT-OFFSET"], rows["1"]["CURRENT-OFFSET"]) == ("2", "1")
    assert int(rows["1"]["LAG"]) == int(rows["1"]["LOG-END-OFFSET"]) - 1

    deleted = cluster.tool("kafka-consumer-groups", "--delete-offsets", "--group", group, "--topic", topic)
    assert "Request succeeded for deleting offsets from group" in deleted.stdout
    assert [row["STATUS"] for row in table(deleted.stdout)] == ["Successful", "Successful"]
    removed = cluster.tool("kafka-consumer-groups", "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in removed.stdout
    assert group not in cluster.tool("kafka-consumer-groups", "--list").stdout.split()
    unknown = cluster.tool("kafka-consumer-groups", "--delete", "--group", group, check=False)
    assert "GroupIdNotFoundException" in unknown.stdout + unknown.stderr


def offsets(cluster: Cluster, topic: str, spec: str) -> dict[int, int]:
    """kafka-get-offsets ``--time spec``: partition -> offset (the partitions it prints)."""
    printed = cluster.tool("kafka-get-offsets", "--topic", topic, "--time", spec).stdout.split()
    return {int(line.rsplit(":", 2)[1]): int(line.rsplit(":", 2)[2]) for line in printed}


def test_get_offsets_by_max_timestamp_earliest_local_and_latest_tiered(cluster: Cluster, tmp_path):
    topic = cluster.topic(partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for partition, seconds in ((0, 1), (0, 3), (0, 2), (1, 5), (1, 4)):
        producer.produce(topic, b"v", partition=partition, timestamp=BASE_TS + seconds * 1000)
        assert producer.flush(30) == 0  # in this order: the largest timestamp is at offsets 1 and 0
    assert offsets(cluster, topic, "-1") == {0: 3, 1: 2}
    assert offsets(cluster, topic, "-3") == {0: 1, 1: 0}  # max timestamp (ListOffsets v7+)
    assert offsets(cluster, topic, "-2") == offsets(cluster, topic, "-4") == {0: 0, 1: 0}  # earliest local (v8+)
    plan = tmp_path / "delete.json"
    plan.write_text(f'{{"version": 1, "partitions": [{{"topic": "{topic}", "partition": 0, "offset": 2}}]}}')
    cluster.tool("kafka-delete-records", "--offset-json-file", str(plan))
    assert offsets(cluster, topic, "-2") == offsets(cluster, topic, "-4") == {0: 2, 1: 0}  # every log is local
    # Latest tiered (v9+): no tiered storage, so no offset, and the tool prints no partition.
    latest_tiered = cluster.tool("kafka-get-offsets", "--topic", topic, "--time", "-5")
    assert latest_tiered.stdout.strip() == "", latest_tiered.stdout


def tab_rows(output: str) -> list[dict[str, str]]:
    """The rows of kafka-transactions' tab-separated table, as dicts by column name."""
    header, *lines = [line for line in output.splitlines() if line.strip()]
    names = [name.strip() for name in header.split("\t")]
    return [dict(zip(names, (value.strip() for value in line.split("\t")), strict=False)) for line in lines]


def test_transactions_list_and_describe(cluster: Cluster):
    topic = cluster.topic(partitions=2)
    done_id, open_id = f"tools-done-{topic}", f"tools-open-{topic}"
    done = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": done_id})
    done.init_transactions(60)
    done.begin_transaction()
    done.produce(topic, b"committed", partition=0)
    done.commit_transaction(60)
    ongoing = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": open_id})
    ongoing.init_transactions(60)
    ongoing.begin_transaction()
    ongoing.produce(topic, b"open", partition=1)
    assert ongoing.flush(30) == 0

    listed = {row["TransactionalId"]: row for row in tab_rows(cluster.tool("kafka-transactions", "list").stdout)}
    assert (listed[done_id]["TransactionState"], listed[open_id]["TransactionState"]) == ("CompleteCommit", "Ongoing")
    described = tab_rows(cluster.tool("kafka-transactions", "describe", "--transactional-id", open_id).stdout)
    assert [
        (
            row["CoordinatorId"],
            row["ProducerId"],
            row["TransactionState"],
            row["TransactionTimeoutMs"],
            row["TopicPartitions"],
        )
        for row in described
    ] == [(listed[open_id]["Coordinator"], listed[open_id]["ProducerId"], "Ongoing", "60000", f"{topic}-1")]
    ongoing.abort_transaction(60)
    # EndTxn returns once PrepareAbort is logged; Apache Kafka writes the markers and moves to
    # CompleteAbort after that, so the state is read until it leaves PrepareAbort.

    def past_prepare_abort() -> list[tuple[str, str]] | None:
        described = tab_rows(cluster.tool("kafka-transactions", "describe", "--transactional-id", open_id).stdout)
        states = [(row["TransactionState"], row["TopicPartitions"]) for row in described]
        return states if states != [("PrepareAbort", f"{topic}-1")] else None

    states = wait_until(past_prepare_abort, "the transaction to leave PrepareAbort", interval=0.2)
    assert states == [("CompleteAbort", "")]
    unknown = cluster.tool("kafka-transactions", "describe", "--transactional-id", f"none-{topic}", check=False)
    assert (
        unknown.returncode != 0
        and f"transactionalId `none-{topic}` failed because the ID could not be found"
        in unknown.stdout + unknown.stderr
    )


def read_committed(cluster: Cluster, topic: str) -> list[bytes]:
    """Every value a read_committed consumer gets from partition 0 of ``topic``, up to its end."""
    messages = read_to_end(
        cluster.bootstrap_servers,
        topic,
        0,
        60,
        **{"group.id": f"committed-{topic}", "isolation.level": "read_committed"},
    )
    return [message.value() for message in messages]


def test_transactions_describe_producers_find_hanging_and_abort(cluster: Cluster):
    """describe-producers shows each producer of a partition and the start of its open
    transaction; find-hanging does not report a transaction its coordinator knows; abort ends an
    open transaction with an ABORT marker, after which read_committed readers move past it."""
    topic = cluster.topic(partitions=1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
    for index in range(3):
        plain.produce(topic, f"plain-{index}".encode(), partition=0)
    assert plain.flush(30) == 0
    transactional = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"hang-{topic}"})
    transactional.init_transactions(60)
    transactional.begin_transaction()
    for index in range(5):
        transactional.produce(topic, f"open-{index}".encode(), partition=0)
    assert transactional.flush(30) == 0

    def producers() -> list[tuple[str, str, str]]:
        output = cluster.tool("kafka-transactions", "describe-producers", "--topic", topic, "--partition", "0").stdout
        rows = tab_rows(output)
        assert all(int(row["LastTimestamp"]) > 0 and row["ProducerEpoch"] == "0" for row in rows), output
        return sorted(
            (row["LastSequence"], row["CurrentTransactionStartOffset"], row["LatestCoordinatorEpoch"]) for row in rows
        )

    # The idempotent producer wrote sequences 0-2, the transactional one 0-4 from offset 3, still open.
    assert producers() == [("2", "None", "-1"), ("4", "3", "-1")]
    hanging = cluster.tool("kafka-transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
    assert tab_rows(hanging.stdout) == [], hanging.stdout
    assert read_committed(cluster, topic) == [b"plain-0", b"plain-1", b"plain-2"]  # stops at the open transaction

    cluster.tool("kafka-transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "3")
    assert producers() == [("2", "None", "-1"), ("4", "None", "0")]  # the ABORT marker carries epoch 0
    transactional.produce(topic, b"after", partition=0)
    transactional.commit_transaction(60)  # the coordinator's COMMIT marker comes after the ABORT
    assert read_committed(cluster, topic) == [b"plain-0", b"plain-1", b"plain-2", b"after"]


def test_producer_and_consumer_perf_tests_move_every_record(cluster: Cluster):
    topic = cluster.topic(partitions=2)
    produced = cluster.tool(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={cluster.bootstrap_servers}",
        "acks=all",
        "linger.ms=5",
        bootstrap=False,
        runner=None,
    )  # a JVM of its own
    assert re.search(r"^20000 records sent, [\d.]+ records/sec", produced.stdout, re.MULTILINE), produced.stdout
    consumed = cluster.tool(
        "kafka-consumer-perf-test", "--topic", topic, "--messages", "20000", "--timeout", "60000", runner=None
    )
    header, values = consumed.stdout.strip().splitlines()[-2:]
    stats = dict(
        zip((name.strip() for name in header.split(",")), (value.strip() for value in values.split(",")), strict=False)
    )
    assert stats["data.consumed.in.nMsg"] == "20000", consumed.stdout
