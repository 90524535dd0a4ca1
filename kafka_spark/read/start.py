"""Where a new read starts: ``startingOffsetsFromOutput``, else the starting options.

Spark's Kafka source starts from ``startingOffsets`` (``latest`` for a stream, ``earliest`` for
a batch read). pylog adds ``startingOffsetsFromOutput``: a query whose output a ``pylog-files``
sink wrote before (a new checkpoint, the same output) starts where that output's last committed
batch ended, as recorded in its sidecar (kafka_spark.files.table.committed_source_offsets);
partitions the output never saw start at their earliest offset. This policy joins the source to
the file sink, so it lives here, with the readers that use it (stream.py's initialOffset, batch.py
and late_binding.py), and not in kafka_spark.client, which knows only Kafka (setup.cfg's
contract "client-knows-only-kafka").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:  # pragma: no cover - the caller brings its reader; importing it here adds nothing
    from kafka_spark.client.offset_reader import OffsetReader

__all__ = ["starting_offsets"]

log = logging.getLogger("kafka_spark")


def starting_offsets(
    reader: OffsetReader, tps: Iterable[TopicPartition], *, streaming: bool
) -> dict[TopicPartition, int]:
    """Where a new read of ``tps`` starts: the offsets committed with ``startingOffsetsFromOutput``'s
    output if it has any (partitions it never saw start at earliest), else the starting options
    (default latest for streaming, earliest for batch), resolved with ``reader``."""
    tps = set(tps)
    options = reader.options
    path = options.starting_offsets_from_output
    if path is not None:
        # Imported here: an executor re-resolving a batch read's bounds (late_binding.py) loads
        # the file sink's table code only for a read that names an output.
        from kafka_spark.files.table import committed_source_offsets

        committed = committed_source_offsets(path)
        if committed is not None:
            known = {
                TopicPartition(topic, int(p)): int(offset)
                for topic, partitions in committed.items()
                for p, offset in partitions.items()
                if TopicPartition(topic, int(p)) in tps
            }
            log.info("pylog source: starting from the offsets committed in %s", path)
            return {**reader.earliest_offsets(tps - set(known)), **known}
        log.info("pylog source: %s has no committed batch; using the starting options", path)
    return reader.resolve(
        options.starting_for(streaming=streaming),
        tps,
        option=options.starting_option,
        is_start=True,
    )
