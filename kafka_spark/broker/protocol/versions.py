"""The API versions this broker advertises (shared/reference/kafka-protocol-subset.md §0).

Essentially Apache Kafka 2.3's set: old clients that infer the broker version from ApiVersions
(kafka-python 2.0, aiokafka <= 0.12) land on (2, 3) and use versions served here; newer clients
pick the highest common version. Keys are added here only when their handler exists — an
advertised but unimplemented API changes client behaviour.
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
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60


#: api key -> (min version, max version) served. CreateTopics < 2 and DeleteTopics < 1 were
#: removed from Kafka 4 (and so from kio's schemas); every client we test asks within these.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 7),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (0, 8),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 2),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 2),
    ApiKey.END_TXN: (0, 2),
    ApiKey.TXN_OFFSET_COMMIT: (0, 2),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 2),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.LIST_GROUPS: (0, 2),
    ApiKey.DELETE_GROUPS: (0, 1),
    # Admin APIs at Kafka 2.3's versions (DescribeConfigs v0 left Kafka 4, and kio with it).
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.DESCRIBE_CONFIGS: (1, 2),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 1),  # kafka-python 3 infers Kafka 4.3 from v5: never advertise that
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    # Flexible-only (Kafka 2.8+); admin clients' describe_cluster() needs it (kafka-python 3.0
    # expects v1's endpoint_type). No client's broker-version inference looks at key 60
    # (checked: kafka-python 3.0's list, the protocol reference's §1.2).
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
}

#: Served (and advertised) only on a SASL listener: a PLAINTEXT broker's ApiVersions stays Kafka
#: 2.3's set without them, so no client infers anything new from it (reference §0).
SASL_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}
