"""Whether a micro-batch continues the output: the file sink's guard against duplicates and gaps
across queries.

The rule, for any output schema (raw rows, projections, aggregates): a streaming query's batch is
committed to an output that already holds committed batches only if it provably continues where
the output left off; otherwise nothing of it is committed and the error names the offsets to
start from. The proof uses only what the sink and Spark's checkpoint recorded, never the rows.

What the output holds (:class:`OutputCoverage`, stored in every ``_sink/offsets/<M>``): per
topic-partition, the end offset of the newest committed batch that read it, merged over every
query that wrote here (so a query on topic B does not hide that the output holds topic A); and
the streaming queries whose batches read sources without Kafka-style offsets.

Where a batch N starts (:func:`batch_start`), per Kafka-style source (offsets
``{"topic": {"partition": next}}``, Spark's Kafka source and pylog's):

* N > 0: ``<checkpoint>/offsets/<N-1>``, exact.
* N = 0 with a Spark Kafka source initial-offset log ``<checkpoint>/sources/<i>/0``: that log,
  exact (Spark's ``format("kafka")`` writes it).
* N = 0 whose end offsets record their start (the pylog source without admission control,
  PySpark before 4.2, where the first batch reads data: kafka_spark.read.stream): that start,
  exact.
* N = 0 that wrote no rows: ``offsets/0`` itself. Nothing was written, so after this batch the
  output continues at the batch's end. The pylog source's first batch is such an empty "start
  batch" (kafka_spark.read.stream), so a new pylog query is checked before it reads anything.
* otherwise (N = 0 that wrote rows from a Python source, e.g. pylog under Trigger.Once): unknown.

The checks (:func:`check_continuity`):

* Kafka-style sources: for each topic-partition the batch reads that the output holds, start <
  held → overlap (records written twice), refused; start > held → gap, refused unless the sink's
  failOnDataLoss=false. A partition new in batch N (not in its start) is read from its earliest
  offset, so the output holding it beyond offset 0 is an overlap. Topic-partitions the output
  never held are new input: fine. An unknown start is refused only if the batch reads topics the
  output holds.
* Other sources (rate, files, memory...): their offsets are private to a checkpoint (the file
  source numbers its own log, the rate source counts seconds since its own start), so nothing
  shows whether two queries read the same records. A batch of such a source is refused if
  another streaming query already committed batches of such sources here; the query that wrote
  them continues from its own checkpoint.

These apply to every batch, not only a query's first: a query resuming from an old checkpoint
after another query continued the output is refused the same way. Batch ``df.write`` appends
carry no offsets and are always allowed; they change no coverage.

Known limit: a new query whose first batch reads data, writes no rows (an aggregate holding
everything in state) and has no recorded start (pylog under Trigger.Once) is taken to start at
the batch's end. The pylog source warns under Trigger.Once; use Trigger.AvailableNow.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_spark.files.sidecar import (
    Checkpoint,
    KafkaOffsets,
    OffsetContinuityError,
    SinkState,
    kafka_first_batch_start,
    kafka_offsets_of,
    merge_kafka_offsets,
    offsets_json,
)

EARLIEST = -2  # Spark's offset JSON: start this partition at its earliest offset


@dataclass(frozen=True)
class OutputCoverage:
    """What the committed output holds, in source terms (see the module docstring)."""

    offsets: KafkaOffsets
    other_source_queries: tuple[str, ...] = ()

    @classmethod
    def at(cls, state: SinkState, latest: int | None) -> OutputCoverage:
        """The coverage once manifest ``latest`` is committed (empty for an empty output)."""
        if latest is None:
            return cls({})
        newest = state.read_record(latest)
        if newest.output_offsets is not None and newest.other_source_queries is not None:
            return cls(newest.output_offsets, newest.other_source_queries)
        coverage = cls({})  # records written before coverage was stored: rebuild from all
        for manifest_id in range(latest + 1):
            record = newest if manifest_id == latest else state.read_record(manifest_id)
            coverage = coverage.after(record.query_id, record.sources, record.offsets)
        return coverage

    def after(self, query_id: str | None, sources: list[str | None], end: KafkaOffsets | None) -> OutputCoverage:
        """The coverage once a batch of ``query_id`` with these source end offsets is committed."""
        offsets = {topic: dict(parts) for topic, parts in self.offsets.items()}
        for topic, parts in (end or {}).items():
            offsets.setdefault(topic, {}).update(parts)
        others = self.other_source_queries
        if query_id is not None and query_id not in others and has_other_sources(sources):
            others = (*others, query_id)
        return OutputCoverage(offsets, others)

    def held(self, topic: str, partition: str) -> int | None:
        return self.offsets.get(topic, {}).get(partition)


def has_other_sources(sources: list[str | None]) -> bool:
    """Whether a batch read a source whose offsets are not Kafka-style."""
    return any(raw is not None and kafka_offsets_of(raw) is None for raw in sources)


@dataclass(frozen=True)
class BatchStart:
    """Where a batch starts reading its Kafka-style sources: known offsets, and the topics of
    sources whose start is unknown."""

    offsets: KafkaOffsets
    unknown_topics: frozenset[str] = frozenset()


def batch_start(checkpoint: Checkpoint, batch_id: int, sources: list[str | None], wrote_rows: bool) -> BatchStart:
    """The start of batch ``batch_id`` from Spark's checkpoint (rules in the module docstring)."""
    if batch_id > 0:
        previous = checkpoint.source_offsets(batch_id - 1)
        if previous is not None:
            return BatchStart(merge_kafka_offsets(previous) or {})
    known: KafkaOffsets = {}
    unknown: set[str] = set()
    for index, raw in enumerate(sources):
        end = kafka_offsets_of(raw)
        if end is None:
            continue
        initial = None
        if batch_id == 0:
            initial = checkpoint.kafka_initial_offsets(index) or kafka_first_batch_start(raw)
        if initial is not None:
            known.update(initial)
        elif batch_id == 0 and not wrote_rows:
            known.update(end)
        else:
            unknown.update(end)
    return BatchStart(known, frozenset(unknown))


@dataclass(frozen=True)
class Discontinuity:
    topic: str
    partition: str
    held: int  # the output continues at this offset
    starts_at: int | None  # None: the partition is new in this batch, read from its earliest offset
    kind: str  # "overlap" or "gap"


def find_discontinuities(coverage: OutputCoverage, start: BatchStart, end: KafkaOffsets) -> list[Discontinuity]:
    """Compare where the batch starts with what the output holds, for the topic-partitions both
    cover (a partition of ``end`` missing from the start is read from earliest)."""
    found = []
    for topic in sorted(set(start.offsets) | set(end)):
        if topic in start.unknown_topics:
            continue
        partitions = set(start.offsets.get(topic, {})) | set(end.get(topic, {}))
        for partition in sorted(partitions, key=int):
            held = coverage.held(topic, partition)
            if held is None:
                continue
            starts_at = start.offsets.get(topic, {}).get(partition)
            if starts_at is None:
                if held > 0:
                    found.append(Discontinuity(topic, partition, held, None, "overlap"))
            elif starts_at < held:
                found.append(Discontinuity(topic, partition, held, starts_at, "overlap"))
            elif starts_at > held:
                found.append(Discontinuity(topic, partition, held, starts_at, "gap"))
    return found


class UnknownStartError(OffsetContinuityError):
    """A new query's first batch wrote rows, and nothing recorded where it started reading."""


class OtherSourcesError(OffsetContinuityError):
    """A batch reads sources without Kafka-style offsets into an output that holds another
    query's batches of such sources."""


@dataclass(frozen=True)
class ContinuityCheck:
    """One commit's inputs to the continuity rule."""

    output: str
    query_id: str
    batch_id: int
    sources: list[str | None]
    end: KafkaOffsets
    fail_on_data_loss: bool

    def _restart_advice(self, coverage: OutputCoverage) -> str:
        json_text = offsets_json(self.starting_offsets(coverage))
        return (
            "Stop the query, delete its checkpoint (nothing of this batch was committed) and start "
            f"it again with .option(\"startingOffsets\", '{json_text}'), or with the pylog source's "
            f'.option("startingOffsetsFromOutput", "{self.output}"), which reads the same offsets '
            "from the output."
        )

    def starting_offsets(self, coverage: OutputCoverage) -> KafkaOffsets:
        """Where this query must start to continue the output: for every topic-partition it
        reads, the offset the output continues at, or earliest (-2) where the output holds none."""
        return {
            topic: {p: (held if (held := coverage.held(topic, p)) is not None else EARLIEST) for p in parts}
            for topic, parts in self.end.items()
        }

    def verify(self, coverage: OutputCoverage, start: BatchStart) -> None:
        """Raise an :class:`OffsetContinuityError` (or a subclass) unless the batch provably
        continues the output (rules in the module docstring)."""
        others = [q for q in coverage.other_source_queries if q != self.query_id]
        if others and has_other_sources(self.sources):
            raw = [s for s in self.sources if s is not None and kafka_offsets_of(s) is None]
            raise OtherSourcesError(
                f"batch {self.batch_id} of query {self.query_id} reads source(s) whose offsets are not "
                f"Kafka-style (e.g. {raw[0]}), and the output {self.output} already holds batches that "
                f"query {', '.join(others)} read from such sources. Such offsets are private to a "
                "checkpoint, so the sink cannot tell whether this query reads the same records again "
                "(a file source re-listing the same files, a rate source counting from 0 again). "
                "Nothing of this batch was committed. Continue that query from its own checkpoint, "
                "or write this query to a new output path."
            )
        unknown = sorted(t for t in start.unknown_topics if t in coverage.offsets)
        if unknown:
            held = {t: coverage.offsets[t] for t in unknown}
            raise UnknownStartError(
                f"batch {self.batch_id} of query {self.query_id} wrote rows of topic(s) "
                f"{', '.join(unknown)}, but where it started reading them is recorded nowhere "
                "(Spark keeps no start offsets of a Python source's first batch; the pylog source "
                "records them in an empty first batch, except under Trigger.Once), and the output "
                f"{self.output} already holds records of them, up to {offsets_json(held)} (next offsets "
                "to read). Nothing of this batch was committed. Run the query with "
                "Trigger.AvailableNow or a processing-time trigger instead of Trigger.Once. "
                + self._restart_advice(coverage)
            )
        problems = find_discontinuities(coverage, start, self.end)
        if not self.fail_on_data_loss:
            problems = [p for p in problems if p.kind != "gap"]
        if problems:
            raise OffsetContinuityError(self._describe(problems, coverage))

    def _describe(self, problems: list[Discontinuity], coverage: OutputCoverage) -> str:
        lines = []
        for d in problems:
            where = f"{d.topic}-{d.partition}"
            if d.starts_at is None:
                lines.append(
                    f"  {where}: the output holds offsets up to {d.held - 1}; this query reads the "
                    "partition from its earliest offset (it is new to the query)"
                )
            elif d.kind == "overlap":
                lines.append(
                    f"  {where}: the output holds offsets up to {d.held - 1}; this query starts at "
                    f"{d.starts_at}: offsets {d.starts_at}..{d.held - 1} ({d.held - d.starts_at} "
                    "records) would be written twice"
                )
            else:
                lines.append(
                    f"  {where}: the output continues at offset {d.held}; this query starts at "
                    f"{d.starts_at}: offsets {d.held}..{d.starts_at - 1} ({d.starts_at - d.held}) "
                    "would be skipped"
                )
        gap_advice = ""
        if any(d.kind == "gap" for d in problems):
            gap_advice = (
                " If the skipped offsets hold only transaction markers or compacted records, or "
                "were deleted by retention, set the sink option failOnDataLoss=false to accept the gap."
            )
        return (
            f"batch {self.batch_id} of query {self.query_id} does not continue the output {self.output}:\n"
            + "\n".join(lines)
            + "\nNothing of this batch was committed. "
            + self._restart_advice(coverage)
            + gap_advice
        )
