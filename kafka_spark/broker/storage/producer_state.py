"""Idempotent producers: producer ids, epochs and per-partition sequence numbers.

A producer with ``enable.idempotence`` gets a producer id (pid) and epoch from InitProducerId and
numbers its batches per partition. For each (pid, partition) the broker keeps the epoch and the
last five batches' sequence ranges and offsets (Kafka's ``ProducerStateEntry``,
NUM_BATCHES_TO_RETAIN = 5, the most batches a client keeps in flight), and on Produce:

1. an older epoch than known -> INVALID_PRODUCER_EPOCH (47);
2. a batch equal to one of the five (same epoch, same first and last sequence) is a retry whose
   first attempt was written: it is acknowledged with the original base offset and not written;
3. a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
4. the same epoch must continue at last sequence + 1 (wrapping at 2**31), else 45;
5. no state for the pid (new producer, or state lost to retention): any sequence is accepted
   (Kafka >= 2.5 behaviour, KIP-360).

A producer's state expires, as with Kafka's ``producer.id.expiration.ms`` (1 day), once its
last batch's timestamp is that old and it has no transaction open in the partition: every Spark
task of an idempotent or transactional sink brings a producer id, and a long-lived broker would
otherwise keep them all. A producer that comes back after that is treated as new (rule 5).

The state is rebuilt at start from the batch headers in the log (headers only, no records), so
it survives restarts, for transactional producers too (their markers carry the epoch, so a
fenced epoch stays fenced); the same pass rebuilds the partition's transaction index
(storage/txn_index.py: open transactions -> LSO, aborted transactions). Producer ids come from a block
allocator persisted in the log directory, so an id is never handed out twice, even across a
crash.

Thread-safety: used from the broker's event loop only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from kafka_spark.broker.storage import checkpoint
from kafka_spark.broker.storage.batch import BatchHeader
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.txn_index import PartitionTxnIndex
from kafka_spark.common.topic_partition import TopicPartition

NUM_BATCHES_TO_RETAIN = 5
_SEQUENCE_WRAP = 2**31
_PID_BLOCK = 1000


class ProducerStateError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class BatchMetadata(NamedTuple):  # a named tuple: one is made for every produced batch
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1  # max timestamp of the producer's last batch (Kafka's lastTimestamp)
    last_marker_offset: int = -1  # offset of its last COMMIT/ABORT marker here (-1: none); DescribeProducers
    # reads the coordinator epoch from that marker's value

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % _SEQUENCE_WRAP


class PartitionProducerState:
    """The producers that wrote to one partition, and its transaction index (``txn_index``,
    None for states built without a log)."""

    def __init__(self, topic_partition: TopicPartition, log: Log | None = None) -> None:
        self.topic_partition = topic_partition
        self.producers: dict[int, ProducerStateEntry] = {}
        self.duplicates_acknowledged = 0  # retried batches answered without writing (a metric)
        self.txn_index = PartitionTxnIndex(log) if log is not None else None

    @classmethod
    def load(cls, log: Log) -> PartitionProducerState:
        """The state of ``log`` rebuilt from its stored batch headers (one pass over headers,
        plus one small read per transaction marker for the transaction index)."""
        state = cls(TopicPartition(log.topic, log.partition), log)
        headers = log.batch_headers()
        for header in headers:
            state._record_sequence(header)
        assert state.txn_index is not None
        state.txn_index.rebuild(headers)
        return state

    def check(self, header: BatchHeader) -> int | None:
        """Validate an incoming batch; return the original base offset if it is a duplicate.

        Raises ProducerStateError with the Kafka error code for epoch or sequence violations.
        """
        if header.producer_id < 0 or header.base_sequence < 0:
            return None  # not idempotent (or a control batch)
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"{self.topic_partition} producer {header.producer_id}: epoch {header.producer_epoch} "
                f"is older than the current {entry.epoch} (fenced)",
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"{self.topic_partition} producer {header.producer_id}: new epoch {header.producer_epoch} "
                    f"must start at sequence 0, got {header.base_sequence}",
                )
            return None
        last_seq = _last_seq(header)
        for batch in entry.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == last_seq:
                return batch.base_offset
        expected = (entry.last_seq + 1) % _SEQUENCE_WRAP
        if header.base_sequence != expected:
            raise ProducerStateError(
                ErrorCode.out_of_order_sequence_number,
                f"{self.topic_partition} producer {header.producer_id}: "
                f"expected sequence {expected}, got {header.base_sequence}",
            )
        return None

    def record(self, header: BatchHeader) -> None:
        """Remember a batch just written (``header`` carries its assigned offsets). A
        transactional data batch opens its producer's transaction in the index (moving the LSO);
        markers are reported by the coordinator through ``txn_index.on_marker``."""
        self._record_sequence(header)
        if self.txn_index is not None and not header.is_control:
            self.txn_index.on_data(header)

    def _record_sequence(self, header: BatchHeader) -> None:
        if header.producer_id < 0:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = ProducerStateEntry(header.producer_epoch)
            self.producers[header.producer_id] = entry
        entry.last_timestamp = header.max_timestamp
        if header.is_control:
            entry.last_marker_offset = header.base_offset
        if header.base_sequence < 0:
            return  # control batches move the epoch, not the sequence
        entry.batches.append(
            BatchMetadata(header.base_sequence, _last_seq(header), header.base_offset, header.last_offset)
        )

    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers whose last batch is ``expiration_ms`` old or older and that have no
        transaction open here; the producer ids forgotten."""
        ongoing = self.txn_index.ongoing if self.txn_index is not None else {}
        expired = [
            pid
            for pid, entry in self.producers.items()
            if pid not in ongoing and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Sequences and epochs only (the transaction index needs the log: see :meth:`load`)."""
        for header in headers:
            self._record_sequence(header)


class ProducerIdManager:
    """Hands out producer ids, never the same twice across restarts.

    Ids are reserved in blocks: the end of the current block is made durable before any id in
    it is used, so after a crash allocation resumes at the next block (skipping a few ids, as
    Kafka's ProducerIdManager does).
    """

    def __init__(self, log_dir: Path) -> None:
        self._path = Path(log_dir) / "producer-id-block"
        self._next = checkpoint.read_offset(self._path) or 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + _PID_BLOCK
            checkpoint.write_offset(self._path, self._block_end)
            # ids below the new block end are reserved; a restart starts after them
        pid = self._next
        self._next += 1
        return pid
