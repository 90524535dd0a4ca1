"""Streaming reads: ``spark.readStream.format("pylog")`` (Spark's ``KafkaMicroBatchStream``).

Offsets are Spark's offset JSON as a dict, ``{"orders": {"0": 23, "1": 7}}``: per partition the
next offset to read. A micro-batch reads ``[start, end)`` of every partition in ``end``.

Where things run: ``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` run in Spark's
long-lived Python planner worker on the driver (one reader instance per query run, so in-memory
state such as the AvailableNow target lives for the run); ``read`` runs on executors, on a copy
of the reader built by a second ``streamReader()`` call, and depends only on its partition.

Replays: ``partitions(start, end)`` is a pure function of (start, end) and the options, except
that a partition new in ``end`` starts at its earliest offset, fetched at planning (as Spark).
So a batch replayed after a failure reads the same records.

The start batch. Spark keeps no start offset for the first batch of a Python source: it plans
batch 0 from ``initialOffset()`` and, when batch 0 is replayed after a failure, calls
``initialOffset()`` again (``MicroBatchExecution.runBatch``), and the Python API gives the
source no checkpoint directory to store it in, as Spark's own Kafka source does
(``<checkpoint>/sources/<i>/0``, SPARK-19517). So the first ``latestOffset`` of a new query
returns its start itself: batch 0 is an empty batch whose end offsets, written by Spark to
``<checkpoint>/offsets/0``, are where the query starts, and every batch that reads data starts
from offsets Spark checkpointed. A replayed batch 0 then has nothing to read, whatever the
recomputed start is; and the ``pylog-files`` sink can tell exactly where a new query starts.

* Recognised by state of this reader process (one per query run): ``initialOffset`` was called
  here, no batch was planned yet, and ``latestOffset`` is asked to continue from what
  ``initialOffset`` returned. A restarted query that already has batches never calls
  ``initialOffset``.
* A replay of batch 0 (Spark restarted with ``offsets/0`` written but not ``commits/0``) calls
  ``initialOffset`` (recomputed: I') and then ``partitions(I', offsets/0)`` before any
  ``latestOffset``. Batch 0 of this source is empty by design, so that replay reads
  ``[I'[p], end[p])`` only where ``I'[p] < end[p]`` (which keeps checkpoints written before the
  start batch existed, whose batch 0 carried data, replaying as they did), skips partitions of
  I' that are not in ``end`` (new: the next batch reads them from earliest) and reports nothing
  as data loss: a recomputed start says nothing about lost data.
* Trigger.Once runs exactly one batch, so a start batch would make a first Trigger.Once run read
  nothing. Spark passes ``ReadAllAvailable`` for Trigger.Once whatever the source's default read
  limit is, and :meth:`getDefaultReadLimit` never returns ``ReadAllAvailable``, so that is how
  Trigger.Once is recognised: batch 0 then reads data and its start is not recorded (one
  warning recommends Trigger.AvailableNow).

Admission control (PySpark 4.2+): ``getDefaultReadLimit`` returns ``ReadMaxRows`` from
``maxOffsetsPerTrigger``, else ``ReadMinRows`` from ``minOffsetsPerTrigger``, else
``ReadMaxRows(UNLIMITED)``, which means no limit. PySpark has no composite limit, so with both
options set the engine passes ``ReadMaxRows`` and the source applies ``minOffsetsPerTrigger``
(with ``maxTriggerDelay``) from its options, exactly as Spark's ``CompositeReadLimit`` would.
``ReadAllAvailable`` from the engine overrides both. Under ``Trigger.AvailableNow`` the minimum
is not applied (it could only delay the end of the query, which must drain the snapshot and
stop).

Without admission control (PySpark before 4.2; kafka_spark.spark_api). Spark calls
``latestOffset()`` with no arguments, so the reader keeps the start of the next batch itself:
the end of the range Spark last handed it (``partitions(start, end)``, which Spark also calls
with ``(end, end)`` of the newest checkpointed batch when a query restarts, before anything else)
or that it last returned from ``latestOffset`` (Spark plans the next batch from exactly that,
or, when it equals the start, plans none), else, for a new query, ``initialOffset()``. From that
start it applies ``maxOffsetsPerTrigger`` (:func:`~kafka_spark.offsets.rate_limit`) and
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` as with admission control, so what Spark
checkpoints is the capped end and a restart continues from it. Spark runs Trigger.Once and
Trigger.AvailableNow there as a single batch, indistinguishable from a first trigger: so there is
no empty start batch (a new query's first batch reads data) and that batch's end offsets record
where it started under :data:`~kafka_spark.offsets.START_KEY`: a replay of it reads the same
records, and the ``pylog-files`` sink knows where the query starts. Under Trigger.AvailableNow a
``maxOffsetsPerTrigger`` then bounds the one batch the run reads (a warning says so when the
reader is created): draining in bounded batches needs PySpark 4.2.

Trigger.AvailableNow fetches the latest offsets once and drains up to them. Before each batch is
read, as Spark's ``verifyEndOffsetForTriggerAvailableNow``, the planned end is checked against
the log: a planned partition that is gone, or that now ends before the planned end (the topic
was deleted and recreated), fails the query whatever failOnDataLoss says, instead of reading a
new topic's records as if they continued the old one.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader

from kafka_spark.client.config import consumer_config
from kafka_spark.client.offset_reader import OffsetFetchError, OffsetReader
from kafka_spark.errors import PylogError
from kafka_spark.offsets import (
    START_KEY,
    OffsetRange,
    PartitionEpochs,
    PartitionOffsets,
    first_batch_start,
    new_offset_count,
    offsets_to_dict,
    positions_from_dict,
    positions_to_dict,
    rate_limit,
    report_data_loss,
)
from kafka_spark.options import Assign, SourceOptions, Subscribe, SubscribePattern
from kafka_spark.planning import KafkaInputPartition, plan_for_options
from kafka_spark.read.partition import read_partition
from kafka_spark.read.start import starting_offsets
from kafka_spark.spark_api import (
    ADMISSION_CONTROL,
    ADMISSION_CONTROL_SINCE,
    PYSPARK_VERSION,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

__all__ = ["AvailableNowTopicChangedError", "CheckpointTopicsError", "PylogStreamReader", "UNLIMITED"]

log = logging.getLogger("kafka_spark")

#: ``ReadMaxRows(UNLIMITED)`` is the default read limit without rate options: no limit (Spark's
#: Long.MaxValue), but not ``ReadAllAvailable``, which only Trigger.Once then passes.
UNLIMITED = sys.maxsize


class AvailableNowTopicChangedError(PylogError, RuntimeError):
    """Under Trigger.AvailableNow, a planned partition disappeared or now ends before the planned
    end offset (topic deleted and recreated). Raised whatever failOnDataLoss says, as Spark."""


class CheckpointTopicsError(PylogError, RuntimeError):
    """The query's checkpoint holds offsets of topics the query does not read: the checkpoint
    was written by a query with another subscription."""


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with Spark's Kafka offsets, read limits and data-loss rules."""

    def __init__(self, options: SourceOptions, bootstrap_servers: str):
        self.options = options
        self.bootstrap_servers = bootstrap_servers
        prefix = options.group_id_prefix or "spark-kafka-source"
        self.group_id = f"{prefix}-{uuid.uuid4()}"
        self._offset_reader: OffsetReader | None = None
        self._latest: PartitionOffsets | None = None
        self._available_now = False
        self._available_now_target: PartitionOffsets | None = None
        # Spark's lastTriggerMillis starts at 0, so the first trigger never waits for
        # minOffsetsPerTrigger.
        self._last_trigger_ms = 0.0
        # The start batch (module docstring): what initialOffset returned in this process, and
        # whether a batch was planned (latestOffset) or replayed (batch 0) here yet.
        self._initial: dict | None = None
        self._planned = False
        # KIP-320: the partitions whose recorded position this process validated already, and
        # whether validation is possible at all (None: not decided yet).
        self._validated: set = set()
        self._can_validate: bool | None = None
        # Without admission control: the start of the next batch (module docstring).
        self._next_start: dict | None = None

    # The planner's client is not picklable and has no use on executors.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_offset_reader"] = None
        return state

    @property
    def reader(self) -> OffsetReader:
        if self._offset_reader is None:
            self._offset_reader = OffsetReader(self.options, self.bootstrap_servers)
        return self._offset_reader

    # ---------------------------------------------------------------- offsets

    def initialOffset(self) -> dict:
        """Where a new query starts (``startingOffsetsFromOutput``, else the starting options;
        default latest). Computed once per reader process: Spark asks again when it runs batch
        0, and both answers must agree. A restart recomputes it only to replay batch 0, which
        is the empty start batch (module docstring)."""
        if self._initial is None:
            tps = self.reader.topic_partitions()
            offsets = starting_offsets(self.reader, tps, streaming=True)
            self._initial = positions_to_dict(offsets, self._epochs_of(offsets))
        return {topic: dict(parts) for topic, parts in self._initial.items()}

    def _epochs_of(
        self,
        offsets: PartitionOffsets,
        start: PartitionOffsets | None = None,
        start_epochs: PartitionEpochs | None = None,
    ) -> PartitionEpochs:
        """The leader epoch to record with each offset (KIP-320): a partition that did not move
        keeps the epoch of its start (so the same offsets give the same JSON, and Spark sees no
        new data); others take the epoch ListOffsets reported with them, where known."""
        epochs: PartitionEpochs = {}
        for tp, offset in offsets.items():
            if start is not None and start_epochs and tp in start_epochs and start.get(tp) == offset:
                epochs[tp] = start_epochs[tp]
                continue
            epoch = self.reader.epoch_for(tp, offset)
            if epoch is not None:
                epochs[tp] = epoch
        return epochs

    def _is_first_batch_of_new_query(self, start: dict) -> bool:
        return not self._planned and self._initial is not None and start == self._initial

    def _fetch_latest(self) -> PartitionOffsets:
        return self.reader.latest_offsets(self.reader.topic_partitions())

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next micro-batch: the latest offsets, or fewer under a read limit, or
        ``start`` itself when ``minOffsetsPerTrigger`` says to wait, or for the start batch of a
        new query (module docstring). Without admission control (PySpark before 4.2) Spark
        passes no arguments: :meth:`_latest_offset_unaided`."""
        if start is None or limit is None:
            return self._latest_offset_unaided()
        start_batch = self._is_first_batch_of_new_query(start)
        self._planned = True
        start_offsets, start_epochs = positions_from_dict(start)
        if self._available_now:
            if self._available_now_target is None:
                # Fetched on the first call, not in prepareForTriggerAvailableNow (SPARK-53560).
                self._available_now_target = self._fetch_latest()
                log.info("pylog source: AvailableNow target %s", offsets_to_dict(self._available_now_target))
            latest = self._available_now_target
        else:
            latest = self._fetch_latest()
        self._latest = latest

        if start_batch:
            if not isinstance(limit, ReadAllAvailable):
                log.info("pylog source: start batch; the query starts at %s", start)
                return start
            log.warning(
                "pylog source: Trigger.Once: the first batch of this new query reads data, so where "
                "it starts is not recorded in the checkpoint. If that batch fails, its replay "
                "starts from recomputed starting offsets, and a pylog-files sink cannot verify "
                "that the query continues its output. Use Trigger.AvailableNow, which records the "
                "start in an empty first batch."
            )

        def planned(end: PartitionOffsets) -> dict:
            return positions_to_dict(end, self._epochs_of(end, start_offsets, start_epochs))

        if isinstance(limit, ReadAllAvailable):
            return planned(latest)
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if min_rows is not None and not self._available_now and self._delay(min_rows, start_offsets, latest):
            return positions_to_dict(start_offsets, start_epochs)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if max_rows is None or max_rows >= UNLIMITED:
            return planned(latest)
        new = [tp for tp in latest if tp not in start_offsets]
        earliest_of_new = self.reader.earliest_offsets(new) if new else {}
        return planned(rate_limit(max_rows, start_offsets, latest, earliest_of_new))

    def _latest_offset_unaided(self) -> dict:
        """``latestOffset()`` of PySpark before 4.2: the read limits applied from the start the
        reader keeps (module docstring, "Without admission control")."""
        new_query = self._next_start is None
        if new_query:
            self._warn_unaided()
        start = self.initialOffset() if self._next_start is None else self._next_start
        self._planned = True
        start_offsets, start_epochs = positions_from_dict(start)
        latest = self._fetch_latest()
        self._latest = latest
        end_offsets = latest
        min_rows = self.options.min_offsets_per_trigger
        if min_rows is not None and self._delay(min_rows, start_offsets, latest):
            end_offsets = start_offsets
        elif self.options.max_offsets_per_trigger is not None:
            new = [tp for tp in latest if tp not in start_offsets]
            earliest_of_new = self.reader.earliest_offsets(new) if new else {}
            end_offsets = rate_limit(self.options.max_offsets_per_trigger, start_offsets, latest, earliest_of_new)
        if end_offsets == start_offsets and not new_query:
            end = start  # the same JSON: Spark plans no batch
        else:
            end = positions_to_dict(end_offsets, self._epochs_of(end_offsets, start_offsets, start_epochs))
            if new_query:
                end[START_KEY] = start
        self._next_start = end
        return end

    def _warn_unaided(self) -> None:
        limit = self.options.max_offsets_per_trigger
        if limit is None or ADMISSION_CONTROL:  # (a direct call, as in tests: Spark passes arguments)
            return
        log.warning(
            "pylog source: PySpark %s has no admission control for Python sources (PySpark %s and "
            "later): pylog applies maxOffsetsPerTrigger=%d itself. This PySpark runs "
            "Trigger.AvailableNow and Trigger.Once as a single batch, so such a run reads at most "
            "%d offsets and stops. To drain everything available in bounded batches use PySpark "
            "%s or later; on this PySpark run Trigger.AvailableNow without maxOffsetsPerTrigger.",
            PYSPARK_VERSION,
            ADMISSION_CONTROL_SINCE,
            limit,
            limit,
            ADMISSION_CONTROL_SINCE,
        )

    def _delay(self, min_rows: int, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        # Spark's delayBatch: fire once maxTriggerDelay has passed since the last batch fired,
        # else only with at least minOffsetsPerTrigger new offsets.
        now_ms = time.time() * 1000.0
        if now_ms - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        if new_offset_count(start, latest) < min_rows:
            return True
        self._last_trigger_ms = now_ms
        return False

    def getDefaultReadLimit(self) -> ReadLimit:
        """Never ``ReadAllAvailable``: receiving it tells Trigger.Once apart (module docstring)."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadMaxRows(UNLIMITED)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_dict(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    # ---------------------------------------------------------------- planning and reading

    def offset_ranges(self, start: dict, end: dict) -> list[OffsetRange]:
        """The ranges ``[start, end)`` per partition, after Spark's data-loss checks: partitions
        gone since ``start``, new partitions that do not start at 0, offsets that went
        backwards (all skipped with a warning when failOnDataLoss=false). Partitions of
        ``start`` outside the query's subscription are reported as a checkpoint written by a
        query with another subscription, not as data loss."""
        start_offsets, start_epochs = positions_from_dict(start)
        end_offsets, end_epochs = positions_from_dict(end)
        fail = self.options.fail_on_data_loss
        self._validate_positions(start_offsets, start_epochs, end_offsets, end_epochs)
        new = sorted(tp for tp in end_offsets if tp not in start_offsets)
        if new:
            earliest = self.reader.earliest_offsets(new)
            for tp in new:
                if earliest[tp] != 0:
                    report_data_loss(f"Added partition {tp} starts from {earliest[tp]} instead of 0", fail, log)
                start_offsets[tp] = earliest[tp]
            log.info("pylog source: new partitions %s start at earliest", ", ".join(map(str, new)))
        gone = sorted(tp for tp in start_offsets if tp not in end_offsets)
        unsubscribed = [tp for tp in gone if not self._subscribed(tp)]
        if unsubscribed:
            self._report_unsubscribed(unsubscribed, positions_from_dict(start)[0])
        deleted = [tp for tp in gone if self._subscribed(tp)]
        if deleted:
            report_data_loss(
                f"{', '.join(map(str, deleted))} are gone (topic or partitions deleted)" + self._group_id_hint(),
                fail,
                log,
            )
        ranges = []
        for tp in sorted(end_offsets):
            from_offset, until_offset = start_offsets[tp], end_offsets[tp]
            if until_offset < from_offset:
                report_data_loss(
                    f"Partition {tp}'s offset was changed from {from_offset} to {until_offset}: "
                    f"offsets [{until_offset}, {from_offset}) may have been lost",
                    fail,
                    log,
                )
                continue
            ranges.append(OffsetRange(tp, from_offset, until_offset))
        return ranges

    def _validate_positions(
        self,
        start: PartitionOffsets,
        start_epochs: PartitionEpochs,
        end: PartitionOffsets,
        end_epochs: PartitionEpochs,
    ) -> None:
        """KIP-320: before reading from a recorded position for the first time in this process
        (a restarted query) or after its leader epoch changed (the end was planned in another
        epoch), ask the partition's leader whether the log still holds it. A log truncated below
        it is data loss: failOnDataLoss=true fails naming the partition, the position and where
        the log now ends; false logs it and moves the start back to that offset, so the records
        written since (which reuse the lost offsets) are read, not skipped."""
        due = {
            tp: (offset, start_epochs[tp])
            for tp, offset in start.items()
            if tp in start_epochs
            and tp in end
            and (tp not in self._validated or end_epochs.get(tp) != start_epochs[tp])
        }
        if not due or not self._validation_possible():
            return
        from kafka_spark.client.fetch_client import KafkaProtocolError, client_for
        from kafka_spark.client.leader_epochs import end_offsets_for, find_truncations

        client = client_for(self.bootstrap_servers, f"{self.group_id}-validation", self.reader.timeout_s)
        asked: dict[Any, tuple[int, int]] = {}
        for tp, (_, epoch) in due.items():
            current = self.reader.epoch_for(tp, end[tp])  # as the last ListOffsets answer said
            asked[tp] = (-1 if current is None else current, epoch)
        try:
            # as long as the offset lookups may take with their retries
            patience = self.reader.timeout_s * (max(self.options.fetch_offset_num_retries, 0) + 1)
            answers = end_offsets_for(client, asked, patience)
        except (OSError, KafkaProtocolError) as e:
            raise OffsetFetchError(
                f"validating the recorded positions of {', '.join(map(str, sorted(due)))} against their leader "
                f"epochs (OffsetForLeaderEpoch) failed: {e}. The query can be restarted once the cluster answers."
            ) from e
        skipped = sorted(tp for tp, answer in answers.items() if answer is None)
        if skipped:
            log.info(
                "pylog source: the broker does not serve OffsetForLeaderEpoch v3; positions of %s are not validated",
                ", ".join(map(str, skipped)),
            )
        for truncation in find_truncations(due, answers):
            tp, offset, end_offset = truncation.tp, truncation.offset, truncation.end_offset
            report_data_loss(
                f"Partition {tp}'s log was truncated below the position {offset} the query had planned "
                f"(leader epoch {truncation.epoch}): it now ends that epoch at offset {end_offset}, so the "
                f"records [{end_offset}, {offset}) the query had counted on were lost (a broker lost an "
                f"unflushed tail, or an unclean leader election), and offsets from {end_offset} on name "
                "records written since",
                self.options.fail_on_data_loss,
                log,
            )
            start[tp] = end_offset  # failOnDataLoss=false: the records written since are new, read them
        self._validated.update(due)

    def _validation_possible(self) -> bool:
        """Positions are validated with pylog's own wire client, which speaks plaintext only."""
        if self._can_validate is None:
            from kafka_spark.options import secured_connection

            config = consumer_config(self.options, self.bootstrap_servers, self.group_id)
            self._can_validate = not secured_connection(dict(config))
            if not self._can_validate:
                log.info(
                    "pylog source: the connection is secured (TLS or SASL); recorded positions are not validated "
                    "against leader epochs (pylog's OffsetForLeaderEpoch client speaks plaintext only)"
                )
        return self._can_validate

    def _subscribed(self, tp: Any) -> bool:
        sub = self.options.subscription
        if isinstance(sub, Subscribe):
            return tp.topic in sub.topics
        if isinstance(sub, SubscribePattern):
            return sub.matches(tp.topic)
        assert isinstance(sub, Assign)
        return tp in sub.partitions

    def _describe_subscription(self) -> str:
        sub = self.options.subscription
        if isinstance(sub, Subscribe):
            return f"subscribe={','.join(sub.topics)}"
        if isinstance(sub, SubscribePattern):
            return f"subscribePattern={sub.pattern}"
        return "assign=" + ", ".join(map(str, sorted(sub.partitions)))

    def _report_unsubscribed(self, unsubscribed: list, start: PartitionOffsets) -> None:
        topics = sorted({tp.topic for tp in unsubscribed})
        read = sorted({tp.topic for tp in start if self._subscribed(tp)})
        if not read:
            message = (
                f"The query's checkpoint holds offsets of topic(s) {', '.join(topics)} only, which "
                f"this query does not read ({self._describe_subscription()}): the checkpoint "
                "belongs to a query reading other topics. Give this query a new checkpointLocation "
                "(a checkpoint belongs to one query; Spark does not support changing the topics "
                "of a query)"
            )
        else:
            message = (
                f"The query's checkpoint holds offsets of {', '.join(map(str, unsubscribed))}, "
                f"which this query no longer reads ({self._describe_subscription()}): the "
                "subscription changed since the checkpoint was written. Give this query a new "
                "checkpointLocation, or set failOnDataLoss=false to go on without those "
                "partitions (Spark does not support changing the topics of a query)"
            )
        if self.options.fail_on_data_loss:
            raise CheckpointTopicsError(message)
        log.warning("pylog source: %s; going on because failOnDataLoss=false", message)

    def _replay_of_first_batch(self, start: dict, end: dict) -> list[OffsetRange]:
        """Batch 0 replayed after a restart, from a recomputed ``start`` (module docstring)."""
        start_offsets = positions_from_dict(start)[0]
        ranges = []
        for tp, until_offset in sorted(positions_from_dict(end)[0].items()):
            from_offset = start_offsets.get(tp)
            if from_offset is not None and from_offset < until_offset:
                ranges.append(OffsetRange(tp, from_offset, until_offset))
        log.info(
            "pylog source: replaying the first batch from recomputed starting offsets: %s",
            ", ".join(f"{r.topic_partition} [{r.from_offset}, {r.until_offset})" for r in ranges) or "nothing to read",
        )
        return ranges

    def _verify_available_now_end(self, end: dict) -> None:
        """Spark's ``verifyEndOffsetForTriggerAvailableNow``: every planned partition still
        exists and still reaches the planned end offset."""
        end_offsets = positions_from_dict(end)[0]
        target = self._available_now_target
        assert target is not None
        beyond = sorted(tp for tp, off in end_offsets.items() if tp in target and off > target[tp])
        if beyond:
            raise AvailableNowTopicChangedError(
                "Trigger.AvailableNow: the planned end offsets of "
                + ", ".join(f"{tp} ({end_offsets[tp]} > {target[tp]})" for tp in beyond)
                + " exceed the offsets fetched when the query started. The error could be transient: "
                "restart the query."
            )
        if isinstance(self.options.subscription, Assign):
            existing = set(end_offsets)
        else:
            existing = self.reader.topic_partitions()
        lost = sorted(tp for tp in end_offsets if tp not in existing)
        latest: PartitionOffsets = {}
        if not lost:
            try:
                latest = self.reader.latest_offsets(list(end_offsets))
            except OffsetFetchError as e:  # an assigned partition that no longer exists
                raise AvailableNowTopicChangedError(
                    f"Trigger.AvailableNow: the latest offsets of the planned partitions cannot be "
                    f"read any more ({e}): a topic was deleted while the query ran. Restart the "
                    "query once the topics are back."
                ) from e
        if lost:
            raise AvailableNowTopicChangedError(
                f"Trigger.AvailableNow: planned partitions {', '.join(map(str, lost))} are gone: a "
                "topic was deleted (or recreated with fewer partitions) while the query ran. The "
                "query fails whatever failOnDataLoss says, as Spark's; restart it to go on."
            )
        shrunk = sorted(tp for tp, off in end_offsets.items() if latest[tp] < off)
        if shrunk:
            raise AvailableNowTopicChangedError(
                "Trigger.AvailableNow: "
                + ", ".join(
                    f"{tp} now ends at offset {latest[tp]}, before the planned end {end_offsets[tp]}" for tp in shrunk
                )
                + ": the topic was deleted and recreated while the query ran, so the offsets no "
                "longer name the records planned. The query fails whatever failOnDataLoss says, as "
                "Spark's; restart it (with a new checkpointLocation if the topic is a new one)."
            )

    def _group_id_hint(self) -> str:
        if self.options.group_id is None:
            return ""
        return (
            f". kafka.group.id is set to {self.options.group_id!r}: another query reading with "
            f"the same group id could be the cause"
        )

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        opts = self.options
        self._next_start = end
        recorded = first_batch_start(end)
        if recorded is not None and start != end:
            # A first batch that read data (no admission control): exactly its recorded range,
            # also when a restart replays it from a recomputed initialOffset.
            self._planned = True
            ranges = self.offset_ranges(recorded, end)
        elif self._is_first_batch_of_new_query(start):
            self._planned = True
            ranges = self._replay_of_first_batch(start, end)
        else:
            if self._available_now_target is not None and start != end:
                self._verify_available_now_end(end)
            ranges = self.offset_ranges(start, end)
        return plan_for_options(
            ranges, opts, consumer_config(opts, self.bootstrap_servers, f"{self.group_id}-executor")
        )

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition), partition
        return read_partition(partition)

    # ---------------------------------------------------------------- lifecycle

    def commit(self, end: dict) -> None:
        """Spark finished every batch up to ``end``. With commitOffsetsToGroup=true, publish
        ``end`` to ``kafka.group.id`` for lag monitors (best effort: a failure is logged, the
        checkpoint stays the source of truth)."""
        if not self.options.commit_offsets_to_group:
            return
        from confluent_kafka import KafkaException

        offsets = {tp: off for tp, off in positions_from_dict(end)[0].items() if off >= 0}
        assert self.options.group_id is not None  # options parsing requires it with commitOffsetsToGroup
        try:
            self.reader.commit_group_offsets(self.options.group_id, offsets)
        except KafkaException as e:
            log.warning(
                "pylog source: committing offsets to group %r failed (the query goes on; lag monitors will lag): %s",
                self.options.group_id,
                str(e),  # not the exception: a handler keeping the record would keep its traceback alive
            )

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None
