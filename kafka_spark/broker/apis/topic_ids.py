"""Topics in requests named by name (older versions) or by id (KIP-516: Fetch v13+, Produce v13+,
OffsetCommit and OffsetFetch v10+, TxnOffsetCommit v6+, Metadata v12+ and DeleteTopics v6+)."""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.apis.context import BrokerContext


def topic_name(broker: BrokerContext, topic: Any) -> str | None:
    """The name of a request's topic entry: its ``name`` when it has one, else the name of the
    topic its ``topic_id`` names; None when no topic has that id."""
    name = getattr(topic, "name", None)
    if name is not None:
        return name
    return broker.replicas.topic_name(getattr(topic, "topic_id", None))


def topic_id(broker: BrokerContext, name: str | None) -> Any:
    """The id of topic ``name`` (None for an unknown topic: zero on the wire)."""
    info = broker.replicas.topics().get(name) if name is not None else None
    return info.topic_id if info is not None else None
