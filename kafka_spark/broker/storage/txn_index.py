"""Per-partition transaction index: open transactions (they set the LSO) and aborted ones.

Kafka keeps, per partition, the first offset of every producer's open transaction (in its
``ProducerStateManager``) and a ``.txnindex`` file per segment listing aborted transactions as
``(producer_id, first_offset, last_offset)``, where ``last_offset`` is the offset of the ABORT
marker. This module keeps both in memory and rebuilds them when a partition is first used, from
the batch headers (one pass) plus a decode of each control batch's single record key (78-byte
reads, one per marker), so there is no extra file format to keep crash-consistent with the log.

Contracts:

* ``first_unstable_offset`` = the smallest first offset of the open transactions, or None; every
  change is pushed to ``Log.first_unstable_offset`` so ``log.last_stable_offset`` (LSO) =
  min(first unstable offset, high watermark), which read_committed Fetch and ListOffsets use.
* ``aborted_transactions(fetch_offset, upper)`` answers read_committed fetches: aborted
  transactions whose marker is at or after ``fetch_offset`` and whose first offset is below
  ``upper`` (one past the last offset returned), the rule of Kafka's ``collectAbortedTxns``.

Thread-safety: used from the broker's event loop only.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from kafka_spark.broker.storage.batch import HEADER_SIZE, BatchHeader, read_varint
from kafka_spark.broker.storage.log import Log
from kafka_spark.common.record_batch import (
    CONTROL_COMMIT,
    CONTROL_VALUE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    control_key_position,
    control_type,
)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction of one partition: its producer, first offset and ABORT marker offset."""

    producer_id: int
    first_offset: int
    last_offset: int


def marker_coordinator_epoch(batch: bytes | memoryview) -> int:
    """The coordinator epoch a transaction marker carries, from its one record's value
    (``version:int16, coordinator_epoch:int32``)."""
    key_length, position = control_key_position(batch)
    value_length, position = read_varint(batch, position + max(key_length, 0))
    if value_length < CONTROL_VALUE.size:
        raise ValueError(f"control record value of {value_length} bytes; a marker value has {CONTROL_VALUE.size}")
    _version, epoch = CONTROL_VALUE.unpack_from(batch, position)
    return int(epoch)


class PartitionTxnIndex:
    """Open and aborted transactions of one partition log."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # ordered by last_offset (markers are appended in order)

    @property
    def log(self) -> Log:
        return self._log

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def on_data(self, header: BatchHeader) -> None:
        """A transactional data batch was appended: it opens its producer's transaction here
        unless one is open already."""
        if header.is_transactional and not header.is_control and header.producer_id not in self.ongoing:
            self.ongoing[header.producer_id] = header.base_offset
            self._publish()

    def on_marker(self, producer_id: int, marker_offset: int, commit: bool) -> None:
        """A COMMIT/ABORT marker was appended at ``marker_offset``: the producer's transaction
        (if it wrote anything here) ends; an aborted one is indexed for read_committed fetches."""
        first = self.ongoing.pop(producer_id, None)
        if first is None:
            return
        if not commit:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
        self._publish()

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper)``: marker >= fetch_offset and
        first offset < upper. Entries wholly below the log start offset are dropped first."""
        start = self._log.log_start_offset
        if self.aborted and self.aborted[0].last_offset < start:
            del self.aborted[: bisect_left(self.aborted, start, key=lambda txn: txn.last_offset)]
        begin = bisect_left(self.aborted, fetch_offset, key=lambda txn: txn.last_offset)
        return [txn for txn in self.aborted[begin:] if txn.first_offset < upper]

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Replay stored batch headers (oldest first); reads each control batch's record key."""
        for header in headers:
            if header.is_control:
                if header.producer_id in self.ongoing:
                    batch = self._log.read(header.base_offset, header.size)
                    kind = control_type(memoryview(batch)[: header.size])
                    self.on_marker(header.producer_id, header.base_offset, kind == CONTROL_COMMIT)
            else:
                self.on_data(header)
        self._publish()

    def _publish(self) -> None:
        self._log.first_unstable_offset = self.first_unstable_offset


def last_offset_of(data: bytes | memoryview) -> int:
    """The last offset in a buffer of whole stored batches (hops batch lengths; per batch, not
    per record)."""
    view = memoryview(data)
    position = 0
    last = -1
    while position + HEADER_SIZE <= len(view):
        base_offset, batch_length = struct.unpack_from(">qi", view, position)
        (last_offset_delta,) = struct.unpack_from(">i", view, position + LAST_OFFSET_DELTA_OFFSET)
        last = base_offset + last_offset_delta
        position += batch_length + LOG_OVERHEAD
    return last
