"""Produce (0): validate each partition's record batches per batch, append.

Per partition, in Kafka's order: with an authorizer, WRITE on the transactional id (53) and on
the topic (29); internal topic (17); unknown topic/partition (3); too large
(10); malformed or bad CRC (2); magic != 2 (87); records Kafka's LogValidator refuses (a keyless
record in a compacted topic: 87; a timestamp outside message.timestamp.before/after.max.ms: 32;
per record only where the topic's settings or the batch header call for it), answered in v8+
with each record's index and reason (KIP-467); transactional batches only from the producer's
current epoch (47), for a partition added to its ongoing transaction (48; 49 for a producer id
no transactional id owns; from v12 the partition is added by the batch itself, KIP-890);
idempotent sequence checks (storage/producer_state.py); then append at the log end offset. Batches are
stored verbatim, only base offset and leader epoch (outside the CRC) rewritten, unless the topic's
compression.type names a codec: then batches in another codec are
recompressed in it first, as Kafka does. acks=0 gets no response at all (answering would desynchronise
kafka-python's and aiokafka's correlation ids).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.storage.batch import validate_batches
from kafka_spark.broker.storage.config import COMPRESSION_CODECS
from kafka_spark.broker.storage.errors import RecordValidationError, StorageError
from kafka_spark.broker.storage.producer_state import ProducerStateError
from kafka_spark.broker.storage.records import recompress, validate_records
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker")

#: Produce v12+ is transaction protocol v2 (KIP-890): a transactional batch adds its partition to
#: the producer's transaction itself (no AddPartitionsToTxn).
TRANSACTION_V2_PRODUCE = 12


def handle(broker: BrokerContext, request: Any) -> dict[str, Any] | Deferred | None:
    body = request.body
    acks = body.acks
    responses = []
    appended = False
    durable: list[tuple[dict[str, Any], Any]] = []  # (partition response, fsync future)
    transactional_id = getattr(body, "transactional_id", None)
    refused = ErrorCode.none  # an authorization error for the whole request
    if (
        broker.authorizer is not None
        and transactional_id is not None
        and not access.allowed(broker, request, access.WRITE, access.TRANSACTIONAL_ID, transactional_id)
    ):
        refused = ErrorCode.transactional_id_authorization_failed
    for topic in body.topic_data:
        name = topic.name if topic.name is not None else broker.logs.topic_name(topic.topic_id)  # v13+: by id
        denied = refused or (
            broker.authorizer is not None
            and not access.allowed(broker, request, access.WRITE, access.TOPIC, name or "")
            and ErrorCode.topic_authorization_failed
        )
        partition_responses = []
        for data in topic.partition_data:
            entry = {
                "index": data.index,
                "error_code": ErrorCode.none,
                "base_offset": -1,
                "log_append_time": None,  # -1: CreateTime topics
                "log_start_offset": -1,
            }
            if denied:
                entry["error_code"] = denied
            elif acks not in (-1, 0, 1):
                entry["error_code"] = ErrorCode.invalid_required_acks
            elif name is None:
                entry["error_code"] = ErrorCode.unknown_topic_id
            else:
                log = _append(
                    broker,
                    name,
                    data.index,
                    data.records,
                    acks,
                    entry,
                    transactional_id,
                    request.api_version >= TRANSACTION_V2_PRODUCE,
                )
                if log is not None:
                    appended = True
                    if acks == -1:  # the fsync (flush.on.ack.all) and every in-sync replica
                        if log.config.flush_on_ack_all:
                            durable.append((entry, broker.group_commit.wait_durable(log, log.log_end_offset)))
                        replicated = broker.replicas.wait_replicated(
                            log, entry, log.log_end_offset, body.timeout.total_seconds() * 1000
                        )  # None for a leader alone in its ISR: nothing to wait for
                        if replicated is not None:
                            durable.append((entry, replicated))
            partition_responses.append(entry)
        responses.append({"name": name, "topic_id": topic.topic_id, "partition_responses": partition_responses})
    if appended:
        broker.notifier.notify()
    if acks == 0:
        return None
    response = {"responses": responses, "throttle_time": 0}
    if durable:
        return Deferred(_when_durable(broker.loop, response, durable))
    return response


def _when_durable(
    loop: asyncio.AbstractEventLoop,
    response: dict[str, Any],
    durable: list[tuple[dict[str, Any], asyncio.Future[None]]],
) -> asyncio.Future[dict[str, Any]]:
    """A future of ``response``, done once every partition's fsync is; a partition whose fsync
    failed answers KAFKA_STORAGE_ERROR. Callbacks rather than a coroutine: this runs for every
    acks=all produce, and a Task per request was a measurable share of the loop's time."""
    answer: asyncio.Future[dict[str, Any]] = loop.create_future()
    pending = len(durable)

    def settled(entry: dict[str, Any], future: asyncio.Future[None]) -> None:
        nonlocal pending
        pending -= 1
        if answer.done():
            return
        if future.cancelled():
            answer.cancel()
            return
        error = future.exception()
        if isinstance(error, StorageError):
            logger.error("%s", error)
            entry["error_code"] = ErrorCode.kafka_storage_error
            entry["base_offset"] = -1
        elif error is not None:
            answer.set_exception(error)
            return
        if pending == 0:
            answer.set_result(response)

    for entry, future in durable:
        future.add_done_callback(functools.partial(settled, entry))
    return answer


def _append(
    broker: BrokerContext,
    topic: str,
    partition: int,
    records: bytes | memoryview | None,  # a view into the request frame, as decoded
    acks: int,
    entry: dict[str, Any],
    transactional_id: str | None,
    transaction_v2: bool,
) -> Any:
    """Validate and append; fill ``entry``; return the log when the batch is in it (appended now,
    or earlier for an idempotent retry)."""
    if is_internal_topic(topic):
        # Kafka: "Cannot append to internal topic" (INVALID_TOPIC_EXCEPTION); the broker's own
        # records there (transaction and group state) are replayed at start and must stay its own.
        entry["error_code"] = ErrorCode.invalid_topic_exception
        return None
    code = broker.replicas.check_produce(
        topic, partition, acks
    )  # the leader appends; acks=all needs min.insync.replicas
    if code:
        entry["error_code"] = code
        return None
    try:
        log = broker.logs.get_log(topic, partition)
    except StorageError as error:
        entry["error_code"] = error.error_code
        return None
    entry["log_start_offset"] = log.log_start_offset
    if not records:
        entry["error_code"] = ErrorCode.corrupt_message
        return None
    try:
        config = log.config
        headers = validate_batches(records, config.max_message_bytes)
        validate_records(records, headers, log.name, config, log.now_ms())  # KIP-467 record errors
        codec = COMPRESSION_CODECS[config.compression_type]
        if codec is not None and any(header.compression != codec for header in headers):
            records = recompress(
                records,
                headers,
                codec,
                {1: config.compression_gzip_level, 3: config.compression_lz4_level, 4: config.compression_zstd_level},
            )
            headers = validate_batches(records, config.max_message_bytes)
        for header in headers:
            if header.is_transactional:
                code = broker.transactions.check_produce(
                    transactional_id, header, TopicPartition(topic, partition), transaction_v2=transaction_v2
                )
                if code:
                    logger.warning(
                        "transactional produce to %s-%d by producer %d epoch %d rejected with error %d",
                        topic,
                        partition,
                        header.producer_id,
                        header.producer_epoch,
                        code,
                    )
                    entry["error_code"] = code
                    return None
        producers = broker.producer_state(log)
        duplicates = [producers.check(header) for header in headers]
        if duplicates[0] is not None and all(offset is not None for offset in duplicates):
            # A retry of a batch already written: acknowledge it again (once durable), write nothing.
            entry["base_offset"] = duplicates[0]
            producers.duplicates_acknowledged += 1
            return log
        # fsync for acks=all is group-committed by the caller, off the event loop.
        result = log.append(records, headers=headers, acks=1)
    except (StorageError, ProducerStateError) as error:
        logger.warning("produce to %s-%d rejected: %s", topic, partition, error)
        entry["error_code"] = error.error_code
        if isinstance(error, RecordValidationError):  # v8+ answers say which records, and why
            entry["record_errors"] = [
                {"batch_index": index, "batch_index_error_message": message} for index, message in error.record_errors
            ]
            entry["error_message"] = str(error)
        return None
    for header in result.headers:
        producers.record(header)
    entry["base_offset"] = result.base_offset
    return log
