"""Driver side: is a position still in the log? OffsetForLeaderEpoch (API 23) for the source's
KIP-320 validation.

The source records, with each offset it plans, the leader epoch ListOffsets reported with it
(kafka_spark.offsets, ``@leaderEpochs``). Before it reads from such a position again after a
leader change or a restart, it asks each partition's leader where that epoch ends in the log now:
an end offset below the recorded offset means the log was truncated below the position (a broker
lost an unflushed tail, an unclean leader election), and offsets from the end on now name other
records. The request is OffsetForLeaderEpoch v3 (Kafka 2.1+), sent with pylog's own wire client
(kafka_spark.client.fetch_client: plaintext connections only) to the partition's leader;
confluent-kafka's admin client has no such call.

A broker that does not serve v3 (or is older than Kafka 2.3, which that client needs), a
partition whose answer has no epoch (-1: the broker knows no epoch that old, e.g. a topic
recreated since) and sources on TLS or SASL connections skip the validation, as Kafka's consumer
skips it against brokers without the API.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Mapping
from typing import NamedTuple

from kafka_spark.client.fetch_client import (
    RETRIABLE_ERRORS,
    FetchClient,
    KafkaProtocolError,
    _Reader,
    _string,
    backoff,
)
from kafka_spark.common.kafka_errors import ErrorCode
from kafka_spark.common.topic_partition import TopicPartition

__all__ = ["EpochEnd", "Truncation", "end_offsets_for", "find_truncations"]

log = logging.getLogger("kafka_spark")

API_OFFSET_FOR_LEADER_EPOCH = 23
VERSION = 3


class EpochEnd(NamedTuple):
    """The broker's answer for one partition: the largest epoch <= the one asked for that it
    knows, and the offset where that epoch ends (-1, -1: unknown)."""

    epoch: int
    end_offset: int


class Truncation(NamedTuple):
    """A position below which the log was truncated: ``offset`` (recorded with ``epoch``) and
    the offset the log now ends that epoch at."""

    tp: TopicPartition
    offset: int
    epoch: int
    end_offset: int


def _request_body(asked: Mapping[TopicPartition, tuple[int, int]]) -> bytes:
    topics: dict[str, list[bytes]] = {}
    for tp, (current, epoch) in sorted(asked.items()):
        topics.setdefault(tp.topic, []).append(struct.pack(">iii", tp.partition, current, epoch))
    parts = [struct.pack(">ii", -1, len(topics))]
    for topic, entries in topics.items():
        parts += [_string(topic), struct.pack(">i", len(entries)), *entries]
    return b"".join(parts)


def _parse(body: memoryview) -> dict[TopicPartition, tuple[int, int, int]]:
    r = _Reader(body)
    r.i32()  # throttle_time_ms
    found = {}
    for _ in range(r.i32()):
        topic = r.string() or ""
        for _ in range(r.i32()):
            code, partition, epoch, end = r.i16(), r.i32(), r.i32(), r.i64()
            found[TopicPartition(topic, partition)] = (code, epoch, end)
    return found


def end_offsets_for(
    client: FetchClient, asked: Mapping[TopicPartition, tuple[int, int]], timeout_s: float
) -> dict[TopicPartition, EpochEnd | None]:
    """For each partition ``(current leader epoch or -1, epoch)``: where the epoch ends on the
    partition's leader. None where the broker does not serve OffsetForLeaderEpoch v3. Leader
    moves, a leader without an answer (killed, restarting) and a partition without a leader for
    a moment are retried with a fresh lookup (and no current epoch) for up to ``timeout_s``;
    after that, or on another error, :class:`KafkaProtocolError` names the partitions."""
    results: dict[TopicPartition, EpochEnd | None] = {}
    pending = dict(asked)
    deadline = time.monotonic() + timeout_s
    attempt = 0
    last: Exception | str = "no answer"
    while True:
        retry: dict[TopicPartition, tuple[int, int]] = {}
        by_leader: dict[tuple[str, int], dict[TopicPartition, tuple[int, int]]] = {}
        for tp, position in pending.items():
            try:
                leader = client.leader(tp.topic, tp.partition, refresh=attempt > 0)
            except (OSError, KafkaProtocolError) as error:
                if isinstance(error, KafkaProtocolError) and error.code not in RETRIABLE_ERRORS:
                    raise
                last, retry[tp] = error, (-1, position[1])
                continue
            by_leader.setdefault(leader, {})[tp] = position
        for leader, wanted in by_leader.items():
            try:
                conn = client.connection(leader)
                low, high = conn.versions.get(API_OFFSET_FOR_LEADER_EPOCH, (0, -1))
                if not low <= VERSION <= high:
                    results.update(dict.fromkeys(wanted))
                    continue
                try:
                    found = _parse(conn.request(API_OFFSET_FOR_LEADER_EPOCH, VERSION, _request_body(wanted)))
                except (OSError, KafkaProtocolError):
                    client.discard(conn)
                    raise
            except OSError as error:  # the leader went away: whoever leads next answers
                last = error
                retry.update({tp: (-1, epoch) for tp, (_, epoch) in wanted.items()})
                continue
            except KafkaProtocolError as error:
                if error.code != ErrorCode.unsupported_version:  # a broker older than Kafka 2.3
                    raise
                results.update(dict.fromkeys(wanted))
                continue
            for tp, (_current, epoch) in wanted.items():
                code, answered_epoch, end = found.get(tp, (-1, -1, -1))
                if code == 0:
                    results[tp] = EpochEnd(answered_epoch, end)
                elif code in RETRIABLE_ERRORS:
                    last, retry[tp] = f"error code {code}", (-1, epoch)
                else:
                    raise KafkaProtocolError(
                        f"OffsetForLeaderEpoch for {tp} (leader epoch {epoch}) failed with error code {code}", code
                    )
        if not retry:
            return results
        if time.monotonic() >= deadline:
            names = ", ".join(str(tp) for tp in sorted(retry))
            raise KafkaProtocolError(
                f"OffsetForLeaderEpoch for {names}: no leader answered in {timeout_s:g} s ({last})"
            )
        pending = retry
        backoff(attempt)
        attempt += 1


def find_truncations(
    positions: Mapping[TopicPartition, tuple[int, int]], answers: Mapping[TopicPartition, EpochEnd | None]
) -> list[Truncation]:
    """The positions ``(offset, epoch)`` the log was truncated below: those whose epoch now ends
    before the offset. Unknown answers (None, or epoch / end offset -1) validate nothing."""
    found = []
    for tp, (offset, epoch) in sorted(positions.items()):
        answer = answers.get(tp)
        if answer is None or answer.epoch < 0 or answer.end_offset < 0:
            continue
        if answer.end_offset < offset:
            found.append(Truncation(tp, offset, epoch, answer.end_offset))
    return found
