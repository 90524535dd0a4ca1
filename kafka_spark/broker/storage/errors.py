"""Storage errors, each carrying the Kafka error code the broker puts on the wire.

The protocol layer catches ``StorageError`` and answers with ``error.error_code``; the message is
for logs and for the ``error_message`` fields that have one, so it names the topic, partition,
offset or setting involved and says what to do.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class StorageError(Exception):
    """Base class. ``error_code`` is Kafka's numeric error code (-1 UNKNOWN_SERVER_ERROR here)."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRangeError(StorageError):
    """A fetch offset outside ``[log_start_offset, log_end_offset]`` (1 OFFSET_OUT_OF_RANGE).

    Clients answer it by resetting per their ``auto.offset.reset`` policy.
    """

    error_code = ErrorCode.offset_out_of_range

    def __init__(self, message: str, *, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptRecordError(StorageError):
    """A record batch that is truncated, inconsistent or fails its CRC (2 CORRUPT_MESSAGE)."""

    error_code = ErrorCode.corrupt_message


class UnknownTopicOrPartitionError(StorageError):
    """No such topic, or no such partition of it (3 UNKNOWN_TOPIC_OR_PARTITION)."""

    error_code = ErrorCode.unknown_topic_or_partition


class RecordTooLargeError(StorageError):
    """A produce payload above the topic's ``max.message.bytes`` (10 MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.message_too_large


class InvalidTopicError(StorageError):
    """An illegal topic name (17 INVALID_TOPIC_EXCEPTION)."""

    error_code = ErrorCode.invalid_topic_exception


class TopicExistsError(StorageError):
    """CreateTopics for a topic that already exists (36 TOPIC_ALREADY_EXISTS)."""

    error_code = ErrorCode.topic_already_exists


class InvalidPartitionsError(StorageError):
    """A partition count below 1, or not above the current count (37 INVALID_PARTITIONS)."""

    error_code = ErrorCode.invalid_partitions


class InvalidConfigError(StorageError):
    """An unknown topic config name or a bad value (40 INVALID_CONFIG)."""

    error_code = ErrorCode.invalid_config


class KafkaStorageError(StorageError):
    """The operating system failed a read or write of the log directory (56 KAFKA_STORAGE_ERROR).

    Clients retry it; the cause (disk full, permissions, ...) is in the message and ``__cause__``.
    """

    error_code = ErrorCode.kafka_storage_error


class InvalidRecordError(StorageError):
    """A batch Kafka's broker would refuse as a whole: wrong magic, or a control batch sent by a
    client (87 INVALID_RECORD)."""

    error_code = ErrorCode.invalid_record


class RecordValidationError(StorageError):
    """Records of a batch Kafka's ``LogValidator`` refuses one by one (KIP-467): the batch is
    refused, and ``record_errors`` says which records and why, as ``(index of the record in its
    batch, message)`` pairs, which Produce v8+ answers return."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidRecordsError(RecordValidationError, InvalidRecordError):
    """Records refused for what they hold: a record without a key in a compacted topic
    (87 INVALID_RECORD)."""


class InvalidTimestampError(RecordValidationError):
    """Records whose timestamps lie outside ``message.timestamp.before.max.ms`` /
    ``message.timestamp.after.max.ms`` of the broker's clock (32 INVALID_TIMESTAMP)."""

    error_code = ErrorCode.invalid_timestamp
