"""Kafka's random UUIDs (cluster ids, topic ids), as Kafka's ``Uuid.randomUuid`` makes them."""

from __future__ import annotations

import base64
import uuid

__all__ = ["random_cluster_id", "random_uuid", "uuid_base64"]

#: Kafka reserves these two: the zero UUID means "no id", and 1 is the metadata topic's id.
_RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))


def uuid_base64(value: uuid.UUID) -> str:
    """The 22-character url-safe base64 form Kafka prints and its tools take."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def random_uuid() -> uuid.UUID:
    """A random UUID that is not reserved and whose base64 form does not start with ``-``: such
    an id given to a command-line tool (``kafka-storage format -t -Ab...``) reads as an option,
    so Kafka never makes one."""
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED and not uuid_base64(value).startswith("-"):
            return value


def random_cluster_id() -> str:
    """A new cluster id: :func:`random_uuid` in base64."""
    return uuid_base64(random_uuid())
