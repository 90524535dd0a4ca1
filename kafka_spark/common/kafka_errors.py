"""The Kafka error codes the connector's own wire clients read (client/fetch_client.py, cli/group_admin.py).

The broker spells Kafka's error codes as kio's generated ``kio.schema.errors.ErrorCode``. The
connector does not import it: these clients run in Spark's Python workers, where kio would add
36 modules and some 15 ms per worker, and 250 modules and 0.2 s where hypothesis is installed
(kio.static imports it when present), for a handful of numbers. So this module repeats the
codes the connector needs, with kio's names and values; tests/common/test_kafka_errors.py fails if
one of them ever disagrees with kio's, so there is still one spelling.
"""

from __future__ import annotations

import enum

__all__ = ["ErrorCode", "error_name"]


class ErrorCode(enum.IntEnum):
    """A subset of Kafka's error codes, named as kio's ``ErrorCode`` (Kafka's names, lower case)."""

    none = 0
    offset_out_of_range = 1
    unknown_topic_or_partition = 3
    leader_not_available = 5
    not_leader_or_follower = 6
    request_timed_out = 7
    replica_not_available = 9
    network_exception = 13
    coordinator_load_in_progress = 14
    coordinator_not_available = 15
    not_coordinator = 16
    invalid_group_id = 24
    unknown_member_id = 25
    topic_authorization_failed = 29
    group_authorization_failed = 30
    unsupported_version = 35
    kafka_storage_error = 56
    group_id_not_found = 69
    fenced_leader_epoch = 74
    unknown_leader_epoch = 75
    group_subscribed_to_topic = 86
    unknown_topic_id = 100


def error_name(code: int) -> str:
    """Kafka's name of ``code`` (``LEADER_NOT_AVAILABLE``), or the number for one not listed here."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)
