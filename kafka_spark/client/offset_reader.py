"""Driver side: offsets and metadata of the subscribed topics (Spark's ``KafkaOffsetReader*``).

:class:`OffsetReader` runs in Spark's Python *planner* worker, a separate process from the
user's driver program: nothing here may rely on state of the user's process. Its clients' configs
come from kafka_spark.client.config; the executors' consumers from kafka_spark.client.consumer_pool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_spark.client.config import admin_config, consumer_config, isolation_level
from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.pool import ClientPool
from kafka_spark.client.refusal import CredentialsRefused, RefusalWatch, list_topics_watching
from kafka_spark.client.token_provider import TokenLoginError
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import PylogError
from kafka_spark.offsets import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
)
from kafka_spark.options import PylogOptionError, SourceOptions

if TYPE_CHECKING:  # pragma: no cover
    from confluent_kafka.admin import AdminClient

__all__ = ["OffsetFetchError", "OffsetReader", "check_specified_partitions"]

log = logging.getLogger("kafka_spark")


#: How long a driver-side metadata or offset call may take unless kafka.default.api.timeout.ms says.
DEFAULT_API_TIMEOUT_MS = 30_000


class OffsetFetchError(PylogError, RuntimeError):
    """The broker did not answer an offset or metadata request within the configured retries,
    or could not be reached at all within ``kafka.default.api.timeout.ms``."""


_INTERNAL_TOPICS = {"__consumer_offsets", "__transaction_state"}


class OffsetReader:
    """Driver-side metadata and offset lookups (Spark's ``KafkaOffsetReaderAdmin``).

    Uses one confluent-kafka ``AdminClient`` (ListOffsets honours ``kafka.isolation.level``, so
    "latest" is the last stable offset under ``read_committed``). Each call is retried
    ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart, with a fresh client
    after a failure. Before the first call, and again after a failure, the cluster must accept a
    connection within ``kafka.default.api.timeout.ms`` (kafka_spark.client.reachability); if it does not,
    the call fails at once naming the address, with no retries (they would each wait out the
    whole timeout against a cluster that is not there). Not thread-safe; not picklable (holds a
    client): create it where it is used.
    """

    def __init__(self, options: SourceOptions, bootstrap_servers: str, timeout_s: float | None = None):
        self.options = options
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = api_timeout_s(options) if timeout_s is None else timeout_s
        self._admin: AdminClient | None = None
        self._refusal = RefusalWatch()
        self._reached = False
        # The last offset ListOffsets gave each partition and the leader epoch the answer carried
        # (v4+), for epoch_for.
        self._reported: dict[TopicPartition, tuple[int, int]] = {}
        log.info("pylog source: using bootstrap servers %s", bootstrap_servers)

    def _client(self) -> AdminClient:
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            try:
                self._admin = AdminClient(
                    routed({**admin_config(self.options, self.bootstrap_servers), "error_cb": self._refusal})
                )
            except (KafkaException, ValueError, TypeError) as e:  # a bad kafka.* property
                raise PylogOptionError(
                    f"cannot create a Kafka client from the kafka.* options: {e}. kafka.* options "
                    f"are passed to confluent-kafka (librdkafka property names)."
                ) from e
        return self._admin

    def _await_cluster(self, what: str) -> None:
        from kafka_spark.client.reachability import ClusterUnreachable, wait_reachable

        if self._reached:
            return
        try:
            wait_reachable(self.bootstrap_servers, self.timeout_s, require_answer=True)
        except ClusterUnreachable as e:
            raise OffsetFetchError(
                f"{what} failed: {e}. Check that the broker runs and that kafka.bootstrap.servers names it; "
                f"set kafka.default.api.timeout.ms (now {int(self.timeout_s * 1000)}) to wait longer."
            ) from None
        self._reached = True

    def _with_retries(self, what: str, fn):
        attempts = max(self.options.fetch_offset_num_retries, 0) + 1
        last: Exception | None = None
        for attempt in range(attempts):
            self._await_cluster(what)
            try:
                return fn(self._client())
            except PylogOptionError:
                raise
            except (CredentialsRefused, TokenLoginError) as e:  # no retry cures it
                raise OffsetFetchError(f"{what} failed: {e}.") from None
            except Exception as e:  # noqa: BLE001 - any client failure is retried, then reported
                last = e
                refused = self._refusal.explain(self._admin, self.bootstrap_servers) if self._admin else None
                if refused is not None:
                    raise OffsetFetchError(f"{what} failed: {refused}.") from e
                log.warning(
                    "pylog source: %s failed (attempt %d of %d) against %s: %s",
                    what,
                    attempt + 1,
                    attempts,
                    self.bootstrap_servers,
                    str(e),  # not the exception: a handler keeping the record would keep its client alive
                )
                self._admin = None
                self._reached = False  # it may have gone away: the next attempt waits for it first
                if attempt + 1 < attempts:
                    time.sleep(self.options.fetch_offset_retry_interval_ms / 1000.0)
        raise OffsetFetchError(
            f"{what} failed after {attempts} attempts of at most {int(self.timeout_s * 1000)} ms each "
            f"against {self.bootstrap_servers}: {last}. Check kafka.bootstrap.servers; "
            f"fetchOffset.numRetries and fetchOffset.retryIntervalMs control the retries, "
            f"kafka.default.api.timeout.ms the time each attempt may take."
        ) from last

    def topic_partitions(self) -> set[TopicPartition]:
        """The topic-partitions the subscription covers now.

        ``subscribe``: every partition of the listed topics that exist (a missing topic has no
        partitions yet); ``subscribePattern``: of every non-internal topic whose whole name
        matches; ``assign``: the assigned partitions that exist.
        """
        from kafka_spark.options import Assign, Subscribe

        sub = self.options.subscription

        def fetch(admin: AdminClient) -> dict[str, int]:
            metadata = list_topics_watching(admin, self._refusal, self.bootstrap_servers, self.timeout_s)
            return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

        topics = self._with_retries("listing topics", fetch)
        if isinstance(sub, Assign):  # only the assigned partitions that exist, as Spark's AssignStrategy
            existing = {tp for tp in sub.partitions if tp.partition < topics.get(tp.topic, 0)}
            if len(existing) < len(sub.partitions):
                log.warning(
                    "pylog source: assigned %s do not exist (yet); they are read once they do",
                    ", ".join(str(tp) for tp in sorted(set(sub.partitions) - existing)),
                )
            return existing
        if isinstance(sub, Subscribe):
            wanted = [t for t in sub.topics if t in topics]
        else:
            wanted = [t for t in topics if t not in _INTERNAL_TOPICS and sub.matches(t)]
        return {TopicPartition(t, p) for t in wanted for p in range(topics[t])}

    def _list_offsets(
        self, specs: Mapping[TopicPartition, Any], what: str, *, may_be_missing: bool = False
    ) -> dict[TopicPartition, int]:
        """One ListOffsets round (retried as a whole). A negative offset is an answer only where
        ``may_be_missing`` (a timestamp no record reaches); for the earliest and latest offsets it
        means the partition had no usable answer yet (librdkafka's -1001 while a leader moves), so
        it is retried like an error, never taken as a position."""
        if not specs:
            return {}
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        level = isolation_level(self.options)

        def fetch(admin: AdminClient) -> dict[TopicPartition, int]:
            request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}
            futures = admin.list_offsets(request, isolation_level=level, request_timeout=self.timeout_s)
            offsets = {}
            for ktp, future in futures.items():
                try:
                    answer = future.result(self.timeout_s)
                except Exception as e:  # noqa: BLE001 - re-raised naming the partition (no leader, ...)
                    raise OffsetFetchError(f"partition {ktp.topic}-{ktp.partition}: {e}") from e
                offset = answer.offset
                if offset < 0 and not may_be_missing:
                    raise OffsetFetchError(
                        f"partition {ktp.topic}-{ktp.partition}: no offset in the answer ({offset}), "
                        f"as while its leader moves"
                    )
                tp = TopicPartition(ktp.topic, ktp.partition)
                offsets[tp] = offset
                epoch = getattr(answer, "leader_epoch", None)
                if offset >= 0 and epoch is not None and epoch >= 0:
                    self._reported[tp] = (offset, epoch)
            return offsets

        return self._with_retries(what, fetch)

    def epoch_for(self, tp: TopicPartition, offset: int) -> int | None:
        """The leader epoch to record with ``offset`` (KIP-320): the one the last ListOffsets
        answer for ``tp`` carried, if ``offset`` is at or below that answer's offset (it was
        then below the high watermark of a leader in that epoch); None if unknown (no answer
        yet, or a broker older than ListOffsets v4)."""
        reported = self._reported.get(tp)
        if reported is None or not 0 <= offset <= reported[0]:
            return None
        return reported[1]

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps}, "fetching earliest offsets")

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offset (high watermark; LSO under read_committed) of each partition."""
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps}, "fetching latest offsets")

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The first offset whose record timestamp is >= the given one; ``None`` where no record
        is that recent (Kafka answers -1)."""
        from confluent_kafka.admin import OffsetSpec

        found = self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()},
            "fetching offsets for timestamps",
            may_be_missing=True,
        )
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def resolve(
        self,
        spec: OffsetSpec,
        tps: Iterable[TopicPartition],
        *,
        option: str,
        is_start: bool,
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for ``spec`` over ``tps`` (Spark's ``fetchSpecificOffsets`` and
        timestamp variants). ``option`` names the option the spec came from, for messages.

        Specific offsets and per-partition timestamps must list exactly the partitions of
        ``tps``. A timestamp newer than every record gives, for a start,
        ``startingOffsetsByTimestampStrategy``'s answer (``error``: raise; ``latest``: the latest
        offset) and, for an end, the latest offset.
        """
        tps = sorted(set(tps))
        if isinstance(spec, EarliestOffsets):
            return self.earliest_offsets(tps)
        if isinstance(spec, LatestOffsets):
            return self.latest_offsets(tps)
        if isinstance(spec, GlobalTimestamp):
            spec = SpecificTimestamps({tp: spec.timestamp for tp in tps})
        elif isinstance(spec, (SpecificOffsets, SpecificTimestamps)):
            check_specified_partitions(spec, tps, option)
        if isinstance(spec, SpecificOffsets):
            offsets = spec.expand(tps)
            earliest = self.earliest_offsets([tp for tp, o in offsets.items() if o == EARLIEST])
            latest = self.latest_offsets([tp for tp, o in offsets.items() if o == LATEST])
            return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in offsets.items()}
        assert isinstance(spec, SpecificTimestamps)
        found = self.offsets_for_times(spec.timestamps)
        missing = sorted(tp for tp, offset in found.items() if offset is None)
        if missing and is_start and self.options.starting_by_timestamp_strategy == "error":
            tp = missing[0]
            raise PylogOptionError(
                f"No offset matched from request of topic-partition {tp} and timestamp "
                f"{spec.timestamps[tp]} ({option}): no record is that recent. Set "
                f"startingOffsetsByTimestampStrategy=latest to start such partitions at the "
                f"latest offset instead."
            )
        latest = self.latest_offsets(missing)
        return {tp: (offset if offset is not None else latest[tp]) for tp, offset in found.items()}

    def resolve_some(
        self, spec: OffsetSpec, tps: Iterable[TopicPartition], *, option: str, is_start: bool
    ) -> dict[TopicPartition, int]:
        """:meth:`resolve` for some of the partitions a spec covers (a task re-resolving the
        bounds of its own ranges): explicit specs are narrowed to ``tps`` first."""
        tps = sorted(set(tps))
        if isinstance(spec, SpecificOffsets):
            spec = SpecificOffsets({tp: spec.expand(tps)[tp] for tp in tps})
        elif isinstance(spec, SpecificTimestamps):
            spec = SpecificTimestamps({tp: spec.timestamps[tp] for tp in tps})
        return self.resolve(spec, tps, option=option, is_start=is_start)

    def commit_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (next offsets to read) to consumer group ``group_id``, for lag
        monitors. Uses a short-lived consumer with assign(), never joining the group."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        config = dict(consumer_config(self.options, self.bootstrap_servers, group_id))
        config["group.id"] = group_id
        consumer = Consumer(routed(config))
        try:
            consumer.commit(
                offsets=[KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()],
                asynchronous=False,
            )
        finally:
            consumer.close()

    def close(self) -> None:
        self._admin = None


def api_timeout_s(options: SourceOptions) -> float:
    """``kafka.default.api.timeout.ms`` in seconds: how long each lookup may take, as the Java
    client's API calls."""
    return (options.default_api_timeout_ms or DEFAULT_API_TIMEOUT_MS) / 1000.0


#: A pooled reader unused for this long is closed by the pool's evictor thread.
READER_IDLE_TIMEOUT_S = 600.0

# Shared (one reader per cluster and client settings), handed out without being given back: a
# worker runs one task or one plan at a time. The timeout is read at each eviction (tests change it).
_POOL: ClientPool[OffsetReader] = ClientPool(
    "offset-reader", OffsetReader.close, exclusive=False, idle_timeout_s=lambda: READER_IDLE_TIMEOUT_S
)
_EVICTOR = _POOL.evictor


def pooled_offset_reader(options: SourceOptions, bootstrap_servers: str) -> OffsetReader:
    """This process's OffsetReader for the cluster and client settings, kept across uses.

    A Python worker plans and reads many batches (Spark reuses its workers), and a new client's
    first answer costs ~60 ms of wall time (its connections and version negotiation) where the
    lookups of a batch cost a few: a quarter of a 0.5-second read of a million rows. The pooled
    reader takes each use's options (the same client settings; that read's retries and API
    timeout) and checks again that the cluster answers before its first call, so a broker that
    went away fails as a new client would. Not for concurrent use: a worker runs one task or one
    plan at a time. A reader not handed out for :data:`READER_IDLE_TIMEOUT_S` is closed by the
    pool's evictor thread (kafka_spark.client.pool).
    """
    reader = _POOL.acquire((bootstrap_servers, options.kafka_params), lambda: OffsetReader(options, bootstrap_servers))
    _POOL.release(reader, reusable=True)  # handed out, not borrowed: idle from now on
    reader.options = options
    reader.timeout_s = api_timeout_s(options)
    reader._reached = False
    return reader


def evict_idle_offset_readers() -> int:
    """Close the pooled readers not handed out for :data:`READER_IDLE_TIMEOUT_S`; how many."""
    return _POOL.evict_idle()


def pooled_offset_reader_count() -> int:
    """How many readers this process pools (for tests and diagnostics)."""
    return len(_POOL)


def check_specified_partitions(
    spec: SpecificOffsets | SpecificTimestamps, tps: Iterable[TopicPartition], option: str
) -> None:
    """Explicit offsets or timestamps must name exactly the partitions the subscription has now
    (Spark's ``fetchSpecificOffsets`` assertion); a topic they name that does not exist is
    said so."""
    tps = sorted(set(tps))
    if isinstance(spec, SpecificOffsets):
        given = set(spec.expand(tps))
        named_topics = {tp.topic for tp in spec.offsets} | set(spec.topics)
    else:
        given = set(spec.timestamps)
        named_topics = {tp.topic for tp in given}
    existing_topics = {tp.topic for tp in tps}
    missing_topics = sorted(named_topics - existing_topics)
    if given == set(tps) and not missing_topics:
        return
    gone = f" Topic(s) {', '.join(missing_topics)} do not exist or are not subscribed." if missing_topics else ""
    raise PylogOptionError(
        f"If {option} contains specific offsets, you must specify all TopicPartitions (and only "
        f"those of the subscription). Use -1 for latest, -2 for earliest. Specified: "
        f"{', '.join(map(str, sorted(given))) or '-'}; assigned: {', '.join(map(str, tps)) or '-'}.{gone}"
    )
