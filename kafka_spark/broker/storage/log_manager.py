"""LogManager: the topics of one log directory and the partition logs under it.

Layout of ``log_dir``::

    .lock                      held (flock) while a broker uses the directory
    .topics/<topic_id>.json    topic metadata: name, topic_id, partitions, config overrides
                               (named by id: a 249-character topic name leaves no room for a suffix)
    <topic>-<partition>/       one Log per partition (see log.py)

Topic metadata is written atomically (temporary file, fsync, rename). Creation writes the metadata
before the partition directories; deletion first marks the metadata ``"deleted": true`` (the
commit point), then removes the directories, then the metadata, so a crash at any step is finished
on the next start. Thread-safe: one lock guards the topic map; each Log locks itself.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kafka_spark.broker.storage import checkpoint
from kafka_spark.broker.storage.cleaner import DEFAULT_BACKOFF_MS, CleanerStats, LogCleaner
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafka_spark.broker.storage.log import Log, partition_dir
from kafka_spark.common.durable import fsync_dir
from kafka_spark.common.kafka_uuid import random_uuid

logger = logging.getLogger("kafka_spark.broker.storage")

TOPICS_DIR = ".topics"
LOCK_FILE = ".lock"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
MAX_PARTITIONS = 10_000  # keeps "<249-char topic>-<partition>" within 255 bytes


def is_valid_topic_name(name: str) -> bool:
    """Kafka's rule: 1-249 characters of ``[A-Za-z0-9._-]``, and neither "." nor ".."."""
    return bool(_LEGAL_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


def _collision_key(name: str) -> str:
    # Kafka refuses topics differing only by '.' versus '_' (their metric names collide).
    return name.replace(".", "_")


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its partition count, its config overrides (Kafka names) and its id."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    topic_id: uuid.UUID = field(default_factory=random_uuid)

    def to_json(self, *, deleted: bool = False) -> bytes:
        document = {
            "version": 1,
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.configs),
        }
        if deleted:
            document["deleted"] = True
        return json.dumps(document, indent=2, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> tuple[TopicInfo, bool]:
        document = json.loads(raw)
        info = cls(
            document["name"],
            int(document["partitions"]),
            MappingProxyType(dict(document.get("configs", {}))),
            uuid.UUID(document["topic_id"]),
        )
        return info, bool(document.get("deleted", False))


def check_new_topic(
    name: str,
    partitions: int,
    configs: Mapping[str, str | None] | None,
    existing: Mapping[str, TopicInfo],
    default_config: LogConfig,
) -> LogConfig:
    """Check a new topic against the ``existing`` ones; returns its effective config.

    Raises InvalidTopicError (17) for an illegal name or one colliding with an existing topic's,
    TopicExistsError (36), InvalidPartitionsError (37) or InvalidConfigError (40).
    """
    if not is_valid_topic_name(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: use 1-{MAX_TOPIC_NAME_LENGTH} characters of "
            "ASCII letters, digits, '.', '_' and '-', and not '.' or '..'"
        )
    if name in existing:
        raise TopicExistsError(f"topic {name!r} already exists with {existing[name].partitions} partition(s)")
    for other in existing:
        if _collision_key(other) == _collision_key(name):
            raise InvalidTopicError(
                f"topic {name!r} collides with existing topic {other!r}: names differing only "
                "by '.' and '_' are refused, as in Kafka"
            )
    check_partition_count(name, partitions)
    return LogConfig.from_topic_configs(configs or {}, default_config)


def check_partition_count(name: str, partitions: int) -> None:
    """InvalidPartitionsError (37) unless 1 <= ``partitions`` <= the most a topic may have."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"topic {name!r} needs between 1 and {MAX_PARTITIONS} partitions, not {partitions}"
        )


class LogManager:
    """Every topic and partition log under ``log_dir``; loads (and recovers) them all at start.

    ``default_config`` is the broker-wide LogConfig; a topic's effective config is it overridden
    by the topic's configs. ``time_ms`` is the clock given to the logs (tests inject one).
    ``cleaner`` compacts the logs of compacted topics: a background thread every
    ``cleaner_backoff_ms`` (Kafka's log.cleaner.backoff.ms) unless ``enable_cleaner=False``
    (log.cleaner.enable); ``run_cleaner()`` runs a pass now. Leader epochs are the replica
    manager's (kafka_spark.broker.replication), which keeps each partition's leader-epoch cache.
    """

    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig | None = None,
        *,
        time_ms: Callable[[], int] | None = None,
        enable_cleaner: bool = True,
        cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.default_config = default_config or LogConfig()
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}  # Fetch v13+, Produce v13+ and friends name topics by id
        self._logs: dict[tuple[str, int], Log] = {}
        self._closed = False
        try:
            self._topics_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd: int | None = self._acquire_dir_lock()
        except OSError as error:
            raise KafkaStorageError(f"cannot use log directory {self.log_dir}: {error}") from error
        self.cleaner = LogCleaner(self.logs, backoff_ms=cleaner_backoff_ms)
        try:
            self._load()
        except BaseException:
            self.close()
            raise
        if enable_cleaner:
            self.cleaner.start()

    @property
    def _topics_dir(self) -> Path:
        return self.log_dir / TOPICS_DIR

    def _acquire_dir_lock(self) -> int:
        fd = os.open(self.log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(
                f"log directory {self.log_dir} is in use by another broker (its {LOCK_FILE} is locked); "
                "stop that broker or give this one another log_dir"
            ) from None
        return fd

    def _load(self) -> None:
        for leftover in self._topics_dir.glob("*" + checkpoint.TMP_SUFFIX):
            leftover.unlink()
        for path in sorted(self._topics_dir.glob("*.json")):
            info, deleted = TopicInfo.from_json(path.read_bytes())
            if deleted:
                logger.info("finishing the deletion of topic %s", info.name)
                self._remove_partition_dirs(info)
                path.unlink()
                continue
            config = LogConfig.from_stored_configs(info.configs, self.default_config)
            self._topics[info.name] = info
            self._names_by_id[info.topic_id] = info.name
            for partition in range(info.partitions):
                self._open_log(info.name, partition, config)
        known = {
            partition_dir(self.log_dir, name, p).name
            for name, info in self._topics.items()
            for p in range(info.partitions)
        }
        for entry in self.log_dir.iterdir():
            if entry.is_dir() and entry.name != TOPICS_DIR and entry.name not in known:
                logger.warning("%s is not a partition of any known topic; leaving it alone", entry)

    def _open_log(self, topic: str, partition: int, config: LogConfig) -> Log:
        log = Log.open(partition_dir(self.log_dir, topic, partition), topic, partition, config, time_ms=self._time_ms)
        self._logs[(topic, partition)] = log
        return log

    def _metadata_path(self, info: TopicInfo) -> Path:
        return self._topics_dir / f"{info.topic_id}.json"

    # -- topics --------------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *, topic_id: uuid.UUID | None = None
    ) -> TopicInfo:
        """Create a topic and its partition logs; returns its TopicInfo. The name and partition
        count are checked as :func:`check_new_topic` checks them; ``configs`` were checked by the
        request that created the topic (:meth:`LogConfig.from_stored_configs` reads them).
        ``topic_id``: the id to give it (a cluster's brokers share the id its controller chose)."""
        with self._lock:
            self._check_open()
            check_new_topic(name, partitions, None, self._topics, self.default_config)
            config = LogConfig.from_stored_configs(
                {k: v for k, v in (configs or {}).items() if v is not None}, self.default_config
            )
            info = TopicInfo(
                name,
                partitions,
                MappingProxyType({k: v for k, v in (configs or {}).items() if v is not None}),
                topic_id or random_uuid(),
            )
            try:
                checkpoint.atomic_write(self._metadata_path(info), info.to_json())
                self._topics[name] = info
                self._names_by_id[info.topic_id] = name
                for partition in range(partitions):
                    self._open_log(name, partition, config)
            except (OSError, StorageError) as error:
                self._discard(info)
                if isinstance(error, StorageError):
                    raise
                raise KafkaStorageError(f"cannot create topic {name!r} in {self.log_dir}: {error}") from error
            return info

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its data. Raises UnknownTopicOrPartitionError if there is none."""
        with self._lock:
            self._check_open()
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"cannot delete topic {name!r}: it does not exist")
            try:
                checkpoint.atomic_write(self._metadata_path(info), info.to_json(deleted=True))
                self._discard(info)
            except OSError as error:
                raise KafkaStorageError(f"cannot delete topic {name!r} from {self.log_dir}: {error}") from error

    def _discard(self, info: TopicInfo) -> None:
        self._topics.pop(info.name, None)
        self._names_by_id.pop(info.topic_id, None)
        for partition in range(info.partitions):
            log = self._logs.pop((info.name, partition), None)
            if log is not None:
                self.cleaner.abort(log)  # no .cleaned file may appear in a directory being removed
                log.close()
        self._remove_partition_dirs(info)
        self._metadata_path(info).unlink(missing_ok=True)
        fsync_dir(self._topics_dir)

    def _remove_partition_dirs(self, info: TopicInfo) -> None:
        for partition in range(info.partitions):
            shutil.rmtree(partition_dir(self.log_dir, info.name, partition), ignore_errors=True)

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow topic ``name`` to ``count`` partitions in total (CreatePartitions)."""
        with self._lock:
            self._check_open()
            info = self.check_add_partitions(name, count)
            grown = TopicInfo(name, count, info.configs, info.topic_id)
            config = LogConfig.from_stored_configs(info.configs, self.default_config)
            try:
                checkpoint.atomic_write(self._metadata_path(grown), grown.to_json())
                self._topics[name] = grown
                for partition in range(info.partitions, count):
                    self._open_log(name, partition, config)
            except OSError as error:
                raise KafkaStorageError(f"cannot add partitions to {name!r}: {error}") from error
            return grown

    def check_add_partitions(self, name: str, count: int) -> TopicInfo:
        """What :meth:`add_partitions` checks, changing nothing (CreatePartitions validate_only)."""
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"cannot add partitions to topic {name!r}: it does not exist")
            if count <= info.partitions or count > MAX_PARTITIONS:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {info.partitions} partition(s); the new total must be above that "
                    f"and at most {MAX_PARTITIONS}, not {count}"
                )
            return info

    def set_topic_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> TopicInfo:
        """Replace topic ``name``'s config overrides with ``configs`` (Kafka names; a name left out
        goes back to the broker default), as AlterConfigs does, after the request checked them; the
        logs apply them from their next operation. Raises UnknownTopicOrPartitionError (3),
        changing nothing."""
        with self._lock:
            self._check_open()
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            config = LogConfig.from_stored_configs(configs, self.default_config)
            changed = TopicInfo(name, info.partitions, MappingProxyType(dict(configs)), info.topic_id)
            if validate_only:
                return changed
            try:
                checkpoint.atomic_write(self._metadata_path(changed), changed.to_json())
            except OSError as error:
                raise KafkaStorageError(f"cannot change the configs of topic {name!r}: {error}") from error
            self._topics[name] = changed
            for partition in range(info.partitions):
                log = self._logs.get((name, partition))
                if log is not None:
                    log.update_config(config)
            return changed

    def topics(self) -> dict[str, TopicInfo]:
        """A snapshot: topic name -> TopicInfo."""
        with self._lock:
            return dict(self._topics)

    def topic_info(self, name: str) -> TopicInfo | None:
        """The TopicInfo of ``name``, or None."""
        return self._topics.get(name)

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with id ``topic_id``, or None when no topic has it."""
        return self._names_by_id.get(topic_id) if topic_id is not None else None

    def get_log(self, topic: str, partition: int) -> Log:
        """The log of ``topic``-``partition``; UnknownTopicOrPartitionError (3) if there is none."""
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                return log
            info = self._topics.get(topic)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist; create it first")
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has {info.partitions} partition(s), numbered 0-{info.partitions - 1}; "
            f"there is no partition {partition}"
        )

    def logs(self) -> list[Log]:
        """A snapshot of every partition log."""
        with self._lock:
            return list(self._logs.values())

    # -- maintenance ---------------------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        deleted = 0
        for log in self.logs():
            if log.failure is not None:  # offline until a restart; said once when it went offline
                continue
            try:
                deleted += log.delete_old_segments(now_ms)
            except StorageError as error:  # one bad partition must not stop retention of the others
                logger.warning("retention skipped %s: %s", log.name, error)
        return deleted

    def run_cleaner(self, *, force: bool = False) -> CleanerStats:
        """Compact every compacted log now (what the background thread does every backoff);
        ``force`` ignores min.cleanable.dirty.ratio. Safe from any thread."""
        return self.cleaner.clean_now(force=force)

    def flush_all(self) -> None:
        for log in self.logs():
            log.flush()

    def close(self) -> None:
        """Flush and close every log and release the directory lock. Idempotent."""
        if getattr(self, "cleaner", None) is not None:
            self.cleaner.stop()  # outside the lock: a pass may be waiting for it in logs()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for log in self._logs.values():
                log.close()
            self._logs.clear()
            lock_fd = getattr(self, "_lock_fd", None)
            if lock_fd is not None:
                os.close(lock_fd)  # closing the descriptor releases the flock
                self._lock_fd = None

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the log manager of {self.log_dir} is closed")
