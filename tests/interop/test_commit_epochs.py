"""KIP-1251's assignment epochs on pylog's broker and on Apache Kafka 4.3.1, asserted the same on
both: a commit with a member's older epoch goes for the partitions it has held since then, and is
refused whole for any other; a static member back under a new id holds its partitions from epoch
0 (tests/broker/coordinator/test_commit_epochs.py)."""

from __future__ import annotations

from tests.broker.coordinator.test_commit_epochs import older_epoch_commits, static_rejoin_commits
from tests.interop.harness import Cluster
from tests.interop.test_group_migration import place


def test_an_older_epoch_commits_the_partitions_held_since_then_alike(cluster: Cluster) -> None:
    older_epoch_commits(place(cluster, 6))


def test_a_static_member_back_under_a_new_id_holds_its_partitions_from_epoch_0_alike(cluster: Cluster) -> None:
    static_rejoin_commits(place(cluster, 6))
