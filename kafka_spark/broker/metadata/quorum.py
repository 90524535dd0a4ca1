"""The controller quorum as DescribeQuorum (55) and ``kafka-metadata-quorum describe`` show it:
pure values, built by the controller (controller.py, ``Controller.quorum``).

pylog's controller is one object whose role the live broker with the lowest id holds (KRaft's
combined mode, every node a broker and a controller): the *voters* are the cluster's registered
brokers, the *leader* the active controller, the *epoch* the controller epoch, and the metadata
log's offsets are the metadata image versions (each change publishes the next version, committed
at once: the high watermark is the newest version). A voter's log end offset is the version it
last told the controller it applied (with its heartbeat), its last fetch the time of that
heartbeat, and it caught up when that version was the newest. There are no observers (no node is
a broker without the controller role).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The topic-partition of Kafka's metadata log, the only one DescribeQuorum describes.
METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0


@dataclass(frozen=True)
class VoterState:
    """One voter: its id and endpoint, and how far it has the metadata (-1: not known)."""

    node_id: int
    host: str
    port: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[VoterState, ...]
