"""The API versions this broker advertises: Apache Kafka 4.x's (4.4, the newest release) for every
API the broker has, and the older versions it served before, which Kafka 4 dropped, for the
clients that still send them (shared/reference/kafka-protocol-subset.md §1).

Clients pick, per API, the highest version both sides serve, so serving Kafka 4.4's maxima makes
every client land where it lands with Kafka 4.4. Flexible versions (KIP-482) are decoded and
encoded by kio; the three versions Kafka 4.4 added after kio 0.6.5 was generated (ApiVersions v5,
TxnOffsetCommit v6, DeleteGroups v3) are declared in kio's own format in ``schemas.py``. Keys are
added here only when their handler exists — an advertised but unimplemented API changes client
behaviour.
"""

from __future__ import annotations

import enum


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


#: api key -> (min version, max version) served. Minimums stay where the broker started (Kafka 2.3's
#: set) so that old clients keep working: kafka-python 2.0 and aiokafka <= 0.12 infer the broker
#: version from ApiVersions and then send fixed old versions (Metadata v0-1, Fetch v4, ListOffsets
#: v1, OffsetCommit v2 ...). CreateTopics < 2 and DeleteTopics < 1 left Kafka 4, and kio with them.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 5),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 6),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # broker to broker, and kafka-transactions abort (Kafka 4 dropped v0)
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 3),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),  # v0 left Kafka 4, and kio with it
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),  # Kafka 4 dropped v0
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
}


#: Finalized feature levels of the brokers of a cluster where they differ from FEATURES: transaction
#: protocol v2 lets a producer skip AddPartitionsToTxn and the partition's leader then adds the
#: partition to the transaction, a broker-to-broker request to the coordinator this broker does not
#: send; with level 0 clients send AddPartitionsToTxn to the coordinator themselves.
CLUSTER_FINALIZED: dict[str, int] = {"transaction.version": 0}

#: Features (KIP-584) ApiVersions v3+ reports: name -> (min supported, max supported, finalized
#: level). ``transaction.version`` 2 is KIP-890's transaction protocol v2, finalized as Kafka 4
#: finalizes it for new clusters: Kafka's Java clients use it (Produce v12+ and EndTxn v5+ in
#: transactions) only when the broker says so.
FEATURES: dict[str, tuple[int, int, int]] = {
    "transaction.version": (0, 2, 2),
}

#: Served (and advertised) only on a SASL listener, where they mean something; a client on another
#: listener that sends them is disconnected.
SASL_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}
