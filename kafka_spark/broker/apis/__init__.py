"""Kafka API handlers, one module per API, and the dispatch of a decoded request to its handler.

``HANDLERS`` maps api key -> handler. A handler is a plain function of ``(broker, request)``, where
``broker`` is the node as :class:`~kafka_spark.broker.apis.context.BrokerContext` describes it, and
returns a response dict (or a kio dataclass), None for no response (acks=0), a coroutine (the
connection waits for it before reading on: long-polling Fetch, parked JoinGroup / SyncGroup) or a
:class:`~kafka_spark.broker.deferred.Deferred` (the effects are done and the connection reads on;
the response follows in order). The socket server (server.py) moves bytes and calls
:func:`dispatch`; this package decides what a request means.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from kafka_spark.broker.apis import (
    acls,
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    api_versions,
    client_quotas,
    configs,
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_groups,
    delete_records,
    describe_cluster,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    describe_transactions,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    scram_credentials,
    sync_group,
    topics,
    txn_offset_commit,
    write_txn_markers,
)
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.protocol import Request
from kafka_spark.broker.protocol.versions import ApiKey

HANDLERS: dict[int, Callable[[BrokerContext, Any], Any]] = {
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.CREATE_TOPICS: topics.handle_create,
    ApiKey.DELETE_TOPICS: topics.handle_delete,
    ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKey.DELETE_RECORDS: delete_records.handle,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions.handle,
    ApiKey.ELECT_LEADERS: elect_leaders.handle,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe,
    ApiKey.CREATE_ACLS: acls.handle_create,
    ApiKey.DELETE_ACLS: acls.handle_delete,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers.handle,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
    ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_credentials.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.handle_alter,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs.handle,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe,
    ApiKey.ALTER_CONFIGS: configs.handle_alter,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
    ApiKey.END_TXN: end_txn.handle,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.JOIN_GROUP: join_group.handle,
    ApiKey.SYNC_GROUP: sync_group.handle,
    ApiKey.HEARTBEAT: heartbeat.handle,
    ApiKey.LEAVE_GROUP: leave_group.handle,
    ApiKey.OFFSET_COMMIT: offset_commit.handle,
    ApiKey.OFFSET_FETCH: offset_fetch.handle,
    ApiKey.LIST_GROUPS: list_groups.handle,
    ApiKey.DESCRIBE_GROUPS: describe_groups.handle,
    ApiKey.DELETE_GROUPS: delete_groups.handle,
    ApiKey.OFFSET_DELETE: offset_delete.handle,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat.handle,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe.handle,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments.handle,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments.handle,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle,
    ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs.handle,
    ApiKey.DESCRIBE_QUORUM: describe_quorum.handle,
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources.handle,
}


def dispatch(broker: BrokerContext, request: Request) -> Any:
    """What the handler of ``request`` returns (see the module docstring)."""
    return HANDLERS[request.api_key](broker, request)


async def handle(broker: BrokerContext, request: Request) -> Any:
    """The final response to ``request`` (for in-process callers and tests): a Deferred's response
    or a coroutine's result, awaited."""
    result = dispatch(broker, request)
    if isinstance(result, Deferred):
        result = result.response
    if inspect.isawaitable(result):
        result = await result
    return result
