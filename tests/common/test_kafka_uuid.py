"""Cluster and topic ids as Kafka's Uuid.randomUuid makes them: never reserved, and never an id
whose base64 form starts with '-' (a command-line tool would read it as an option: Apache
Kafka's ``kafka-storage format -t -Ab...`` fails)."""

from __future__ import annotations

import base64
import uuid

from kafka_spark.broker.config import BrokerConfig
from kafka_spark.common import kafka_uuid


def _uuid_whose_base64_starts_with(char: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(char + "A" * 21 + "==")
    return uuid.UUID(bytes=raw)


def test_ids_that_read_as_options_or_are_reserved_are_drawn_again(monkeypatch):
    dash = _uuid_whose_base64_starts_with("-")
    assert kafka_uuid.uuid_base64(dash).startswith("-")
    fine = _uuid_whose_base64_starts_with("Q")
    drawn = iter([dash, uuid.UUID(int=0), uuid.UUID(int=1), fine])
    monkeypatch.setattr(kafka_uuid.uuid, "uuid4", lambda: next(drawn))
    assert kafka_uuid.random_uuid() == fine


def test_new_cluster_ids_are_22_url_safe_characters_not_starting_with_a_dash(tmp_path):
    # One id in 64 would start with '-' if drawn plainly: 2,000 ids would hold ~31 of them.
    ids = {BrokerConfig(log_dir=tmp_path).cluster_id for _ in range(2000)}
    assert len(ids) == 2000
    for cluster_id in ids:
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(cluster_id + "==")).version == 4
