"""Kafka API handlers, one module per API. ``HANDLERS`` maps api key -> handler."""

from __future__ import annotations

from typing import Any, Callable

from kafka_spark.broker.apis import api_versions, fetch, init_producer_id, list_offsets, metadata, produce, topics
from kafka_spark.broker.protocol.versions import ApiKey

HANDLERS: dict[int, Callable[..., Any]] = {
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.CREATE_TOPICS: topics.handle_create,
    ApiKey.DELETE_TOPICS: topics.handle_delete,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
}
