"""The broker's internal topics: ``__consumer_offsets`` and ``__transaction_state``.

The coordinators keep their state in them (committed offsets, transaction states), on a single
node as on a cluster, as Kafka does: each is an ordinary replicated, compacted topic whose
partitions the controller places, and a group id or transactional id belongs to partition
``abs(java_string_hash(key)) % partitions``, whose leader coordinates it. Clients see them in
Metadata with ``is_internal`` set; they may neither produce to them nor create, delete or grow
them (names starting with ``__`` are the broker's own).

Partition counts: Kafka's ``offsets.topic.num.partitions`` and
``transaction.state.log.num.partitions`` are 50; a laptop broker needs a few. A topic created by
an older pylog keeps the partition count it has (a single node made ``__transaction_state`` with
one partition): the coordinators read the count from the metadata, never from these constants.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: Partitions a new ``__consumer_offsets`` / ``__transaction_state`` gets.
OFFSETS_TOPIC_PARTITIONS = 4
TRANSACTION_STATE_PARTITIONS = 4
# Kafka's offsets.topic.segment.bytes / transaction.state.log.segment.bytes: small enough that old
# records roll into cleanable segments; compaction keeps the newest record per key.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
TRANSACTION_STATE_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
#: name -> (partitions when created, configs): what the coordinators create on first use.
INTERNAL_TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    OFFSETS_TOPIC: (OFFSETS_TOPIC_PARTITIONS, OFFSETS_TOPIC_CONFIGS),
    TRANSACTION_STATE_TOPIC: (TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_CONFIGS),
}


def is_internal_topic(name: str) -> bool:
    """Names starting with "__" are reserved for the broker's internal topics."""
    return name.startswith("__")


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), so keys land where Kafka puts them."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value


def partition_for(key: str, partitions: int) -> int:
    """The partition of an internal topic that holds ``key`` (a group id or a transactional id):
    Kafka's ``Utils.abs(key.hashCode) % partitions``."""
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions
