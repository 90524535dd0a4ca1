"""Every API at every version the broker advertises, against kio's encoding, over a real socket.

For each (api key, version) of ApiVersions a request is built from kio's classes of that exact
version (fields filled with values that name a real topic, group and producer), encoded by kio,
sent to the broker and answered; the answer must parse completely with kio's reader of that same
version (every byte accounted for, the correlation id echoed). Behaviour per API is tested
elsewhere; this is the codec and dispatch contract of each version, flexible ones (KIP-482)
included. The advertised ranges themselves are checked against Apache Kafka 4.4's.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.protocol.schemas import request_class
from kafka_spark.broker.protocol.versions import SUPPORTED_VERSIONS, ApiKey
from tests.support.wire import WireClient

TOPIC = "versions"

#: Apache Kafka 4.4.0's validVersions (clients/.../common/message/*Request.json, stable versions
#: only) of the APIs this broker serves: the broker serves each up to the same maximum.
KAFKA_4_4_MAX = {
    ApiKey.PRODUCE: 13,
    ApiKey.FETCH: 18,
    ApiKey.LIST_OFFSETS: 11,
    ApiKey.METADATA: 13,
    ApiKey.OFFSET_COMMIT: 10,
    ApiKey.OFFSET_FETCH: 10,
    ApiKey.FIND_COORDINATOR: 6,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.DESCRIBE_GROUPS: 6,
    ApiKey.LIST_GROUPS: 5,
    ApiKey.API_VERSIONS: 5,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 5,
    ApiKey.ADD_PARTITIONS_TO_TXN: 5,
    ApiKey.ADD_OFFSETS_TO_TXN: 4,
    ApiKey.END_TXN: 5,
    ApiKey.TXN_OFFSET_COMMIT: 6,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.DESCRIBE_LOG_DIRS: 5,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_GROUPS: 3,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_CLUSTER: 2,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
    ApiKey.ELECT_LEADERS: 2,
    ApiKey.DESCRIBE_ACLS: 3,
    ApiKey.CREATE_ACLS: 3,
    ApiKey.DELETE_ACLS: 3,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 2,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    ApiKey.DESCRIBE_QUORUM: 2,
    ApiKey.LIST_CONFIG_RESOURCES: 1,
}

CASES = [(key, version) for key, (low, high) in sorted(SUPPORTED_VERSIONS.items()) for version in range(low, high + 1)]


def test_the_broker_serves_kafka_4_4s_versions():
    for key, high in KAFKA_4_4_MAX.items():
        assert SUPPORTED_VERSIONS[key][1] == high, ApiKey(key).name


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as running:
        running.create_topic(TOPIC, partitions=2)
        yield running


def _value(name: str, kafka_type: str, topic_id: uuid.UUID, key: int) -> Any:
    """A plausible value for a field, by its name: a real topic, partition 0, no waiting."""
    if kafka_type == "uuid":
        return topic_id
    if kafka_type in ("string",):
        if name in ("name", "topic", "topic_name", "resource_name", "resource_name_filter"):
            return f"doomed-{key}" if key == ApiKey.DELETE_TOPICS else TOPIC
        if name in ("member_id",):
            return ""
        if name in ("group_id", "key"):
            return f"group-{key}"
        if name == "protocol_type":
            return "consumer"
        if name in ("transactional_id",) and key == ApiKey.PRODUCE:
            return None
        return "x"
    if kafka_type == "bool":
        return False
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type.startswith("timedelta"):
        waits = name in ("session_timeout", "transaction_timeout")
        return datetime.timedelta(seconds=10) if waits else datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return datetime.datetime.now(datetime.UTC)
    return {
        "acks": 1,
        "max_bytes": 1 << 20,
        "partition_max_bytes": 1 << 20,
        "timestamp": -1,
        "count": 3,
        "num_partitions": 1,
        "replication_factor": 1,
        "response_partition_limit": 10,
        "generation_id": -1,
        "generation_id_or_member_epoch": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "resource_type": 2,
        "session_epoch": -1,
        "endpoint_type": 1,
        "key_type": 0,
        "mechanism": 1,
        "iterations": 4096,
        "node_id": -1,
        "replica_id": -1,
        "current_leader_epoch": -1,
        "offset": 0,
    }.get(name, 0)


def _body(cls: Any, topic_id: uuid.UUID, key: int) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            values[field.name] = [_body(kind.type_, topic_id, key)]
        elif isinstance(kind, EntityField):
            values[field.name] = None if "None" in str(field.type) else _body(kind.type_, topic_id, key)
        elif isinstance(kind, PrimitiveTupleField):
            item_name = "name" if field.name in ("topic_names", "coordinator_keys") else field.name.rstrip("s")
            values[field.name] = [_value(item_name, field.metadata["kafka_type"], topic_id, key)]
        else:
            values[field.name] = _value(field.name, field.metadata.get("kafka_type", ""), topic_id, key)
    return values


@pytest.mark.parametrize("api_key,version", CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES])
def test_each_advertised_version_is_answered_in_kios_encoding_of_that_version(broker, api_key, version):
    topic_id = broker._broker.logs.topic_info(TOPIC).topic_id
    body = _body(request_class(api_key, version), topic_id, api_key)
    if api_key == ApiKey.JOIN_GROUP:  # one member per group, or each join waits for the last one's
        body["group_id"] = f"join-v{version}"
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS:  # kio cannot read the -1 start time of a transaction-less id
        body["transactional_ids"] = ["never-used"]
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(api_key, version, body)  # parses every byte with kio's reader
    assert response is not None
