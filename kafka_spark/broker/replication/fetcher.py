"""A follower's fetcher (Kafka's ``ReplicaFetcherThread``): one task per leader broker, on the
broker's event loop, with a connection to that broker's listener.

For the partitions this broker follows there it first asks the leader (OffsetForLeaderEpoch) where
its own latest leader epoch ended and truncates its log there (KIP-101/279), which removes what a
deposed leader appended but never replicated; then it fetches from its log end offset (Fetch v11
with its replica id), appends the leader's batches verbatim (their offsets and leader epochs
kept), takes the leader's high watermark (capped at its own log end offset) and log start offset.
A follower whose log ends below the leader's log start offset starts over there. An error from
the leader (not the leader any more, an epoch mismatch) stalls the partition until newer
metadata.

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kafka_spark.broker.protocol.versions import ApiKey
from kafka_spark.broker.replication.client import BrokerConnection
from kafka_spark.broker.replication.partition import FOLLOWER, Replica
from kafka_spark.broker.storage.batch import validate_batches
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.metadata.image import MetadataImage

logger = logging.getLogger("kafka_spark.broker.cluster")

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_RETRY_S = 0.1


class FollowerHost(Protocol):
    """What a fetcher uses of its replica manager."""

    node_id: int
    partitions: dict[TopicPartition, Replica]
    image: MetadataImage | None
    replica_fetch_wait_max_ms: int

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def closed(self) -> bool: ...

    def forget_producer_state(self, tp: TopicPartition) -> None: ...

    def login(self) -> Any: ...


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a replica fetcher stopped: %r", task.exception())


class ReplicaFetcher:
    """Fetches, for one leader broker, every partition this broker follows there."""

    def __init__(self, manager: FollowerHost, leader: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: set[TopicPartition] = set()
        self._event = asyncio.Event()
        self._connection: BrokerConnection | None = None
        self._address: tuple[str, int] | None = None
        self._task = manager.loop.create_task(self._run())
        self._task.add_done_callback(_log_failure)

    def wake(self) -> None:
        self._event.set()

    def stop(self) -> None:
        self._task.cancel()
        if self._connection is not None:
            self._connection.close()

    def _ready(self) -> list[Replica]:
        now = time.monotonic()
        replicas = []
        for tp in sorted(self.partitions):
            replica = self.manager.partitions.get(tp)
            if (
                replica is not None
                and replica.role == FOLLOWER
                and replica.state is not None
                and replica.state.leader == self.leader
                and replica.stalled_until <= now
            ):
                replicas.append(replica)
        return replicas

    async def _run(self) -> None:
        manager = self.manager
        while not manager.closed:
            replicas = self._ready()
            image = manager.image
            registration = image.brokers.get(self.leader) if image is not None else None
            if not replicas or registration is None or not registration.alive:
                self._event.clear()
                try:
                    await asyncio.wait_for(self._event.wait(), _RETRY_S * 2)
                except TimeoutError:
                    pass
                continue
            address = (registration.host, registration.port)
            if self._connection is None or self._address != address:
                if self._connection is not None:
                    self._connection.close()
                self._connection = BrokerConnection(
                    address[0], address[1], f"pylog-replica-{manager.node_id}", manager.login()
                )
                self._address = address
            try:
                truncating = [replica for replica in replicas if replica.needs_truncation]
                if truncating:
                    await self._truncate(truncating)
                fetching = [replica for replica in replicas if not replica.needs_truncation]
                if fetching:
                    await self._fetch(fetching)
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ValueError) as error:
                logger.debug(
                    "broker %d: fetching from broker %d failed (%s); retrying", manager.node_id, self.leader, error
                )
                if self._connection is not None:
                    self._connection.close()
                self._connection = None
                await asyncio.sleep(_RETRY_S)
            except StorageError as error:
                logger.warning("broker %d: replicating from broker %d: %s", manager.node_id, self.leader, error)
                await asyncio.sleep(_RETRY_S)
            except Exception:  # noqa: BLE001 - a fetcher that died would leave its partitions unreplicated
                logger.exception("broker %d: replicating from broker %d failed; retrying", manager.node_id, self.leader)
                if self._connection is not None:
                    self._connection.close()
                self._connection = None
                await asyncio.sleep(_RETRY_S)

    def _stall(self, replica: Replica, code: int) -> None:
        logger.debug("%s: leader %d answered error %d; waiting for new metadata", replica.tp, self.leader, code)
        replica.stalled_until = time.monotonic() + _RETRY_S

    async def _truncate(self, replicas: list[Replica]) -> None:
        manager = self.manager
        asked = {}
        for replica in replicas:
            if replica.epochs.latest_epoch < 0:  # nothing stamped yet: nothing to truncate
                replica.needs_truncation = False
                continue
            asked[replica.tp] = (replica, replica.state.leader_epoch if replica.state else -1)
        if not asked:
            return
        topics: dict[str, list[dict[str, int]]] = {}
        for tp, (replica, current) in asked.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": current,
                    "leader_epoch": replica.epochs.latest_epoch,
                }
            )
        assert self._connection is not None
        response = await self._connection.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": manager.node_id,
                "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
            },
        )
        for topic in response.topics:
            for result in topic.partitions:
                replica, current = asked[TopicPartition(topic.topic, result.partition)]
                if replica.state is None or replica.state.leader_epoch != current or replica.role != FOLLOWER:
                    continue  # metadata moved on while we asked
                if result.error_code:
                    self._stall(replica, result.error_code)
                else:
                    self.truncate(replica, result.leader_epoch, result.end_offset)

    async def _fetch(self, replicas: list[Replica]) -> None:
        manager = self.manager
        by_tp = {replica.tp: (replica, replica.state.leader_epoch if replica.state else -1) for replica in replicas}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, (replica, epoch) in by_tp.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": epoch,
                    "fetch_offset": replica.log.log_end_offset,
                    "log_start_offset": replica.log.log_start_offset,
                    "partition_max_bytes": 1 << 20,
                }
            )
        assert self._connection is not None
        response = await self._connection.request(
            ApiKey.FETCH,
            FETCH_VERSION,
            {
                "replica_id": manager.node_id,
                "max_wait": datetime.timedelta(milliseconds=manager.replica_fetch_wait_max_ms),
                "min_bytes": 1,
                "max_bytes": 10 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            timeout=manager.replica_fetch_wait_max_ms / 1000 + 30,
        )
        for topic in response.responses:
            for result in topic.partitions:
                replica, epoch = by_tp[TopicPartition(topic.topic, result.partition_index)]
                if replica.state is None or replica.state.leader_epoch != epoch or replica.role != FOLLOWER:
                    continue
                if result.error_code == ErrorCode.offset_out_of_range:
                    log = replica.log
                    if 0 <= log.log_end_offset < result.log_start_offset:  # behind the leader's retention
                        logger.warning(
                            "%s: broker %d ends at %d, below the leader's log start %d; starting over there",
                            replica.tp,
                            manager.node_id,
                            log.log_end_offset,
                            result.log_start_offset,
                        )
                        log.truncate_fully_and_start_at(result.log_start_offset)
                        replica.epochs.truncate_from_end(0)
                        manager.forget_producer_state(replica.tp)
                    else:  # ahead of the leader: find where the histories part
                        replica.needs_truncation = True
                        self._stall(replica, result.error_code)
                    continue
                if result.error_code:
                    self._stall(replica, result.error_code)
                    continue
                if result.records:
                    self.append(replica, result.records)
                log = replica.log
                log.replicated_high_watermark = min(result.high_watermark, log.log_end_offset)
                if result.log_start_offset > log.log_start_offset:  # the leader's retention / DeleteRecords
                    log.delete_records_before(min(result.log_start_offset, log.high_watermark))

    def append(self, replica: Replica, data: bytes | memoryview) -> None:
        """Append the leader's batches verbatim (offsets and stamped epochs kept)."""
        log = replica.log
        view = memoryview(data)
        headers = validate_batches(view, 1 << 31, allow_control=True)
        first = headers[0]
        if log.log_end_offset == log.log_start_offset and first.base_offset < log.log_end_offset <= first.last_offset:
            # An empty log started inside the leader's first batch (its log start offset is mid-batch):
            # start at the batch instead, as Kafka's fetcher does on an UnexpectedAppendOffsetException.
            log.truncate_fully_and_start_at(first.base_offset)
        position = 0
        groups: list[tuple[int, int, list[Any]]] = []  # (byte start, epoch, headers)
        for header in headers:
            if header.last_offset < log.log_end_offset:
                position += header.size
                continue
            if not groups and header.base_offset != log.log_end_offset:
                logger.warning(
                    "%s: leader sent offset %d, the log ends at %d; truncating again",
                    replica.tp,
                    header.base_offset,
                    log.log_end_offset,
                )
                replica.needs_truncation = True
                return
            if groups and groups[-1][1] == header.partition_leader_epoch:
                groups[-1][2].append(header)
            else:
                groups.append((position, header.partition_leader_epoch, [header]))
            position += header.size
        for start, epoch, group in groups:
            size = sum(header.size for header in group)
            base = log.log_end_offset
            log.append(view[start : start + size], headers=group, acks=1, leader_epoch=epoch)
            if epoch >= 0:
                replica.epochs.assign(epoch, base)

    def truncate(self, replica: Replica, epoch: int, end_offset: int) -> None:
        """After OffsetForLeaderEpoch: cut this replica's log where the leader's history diverges."""
        log = replica.log
        requested = replica.epochs.latest_epoch
        if end_offset < 0:
            target = log.high_watermark  # the leader knows no such epoch: keep what was committed
        else:
            target = min(end_offset, log.log_end_offset)
            if epoch != requested and epoch >= 0:
                target = min(target, replica.epochs.end_offset_for(epoch, log.log_end_offset)[1])
        if target < log.log_end_offset:
            logger.info(
                "%s: broker %d truncates its log from %d to %d (leader epoch %d ended there)",
                replica.tp,
                self.manager.node_id,
                log.log_end_offset,
                target,
                epoch,
            )
            log.truncate_to(max(target, log.log_start_offset))
            replica.epochs.truncate_from_end(log.log_end_offset)
            self.manager.forget_producer_state(replica.tp)
        replica.needs_truncation = False
