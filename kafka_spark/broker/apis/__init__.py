"""Kafka API handlers, one module per API. ``HANDLERS`` maps api key -> handler."""

from __future__ import annotations

from typing import Any, Callable

from kafka_spark.broker.apis import (acls, api_versions, configs, delete_records, describe_cluster, describe_log_dirs,
                                     describe_topic_partitions, elect_leaders, fetch, init_producer_id, list_offsets,
                                     metadata, offset_for_leader_epoch, produce, scram_credentials, topics)
from kafka_spark.broker.apis import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn,
                                     list_transactions, txn_offset_commit)
from kafka_spark.broker.apis import (delete_groups, describe_groups, find_coordinator, heartbeat, join_group, leave_group, list_groups,
                                     offset_commit, offset_delete, offset_fetch, sync_group)
from kafka_spark.broker.apis.context import BrokerContext
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
}
