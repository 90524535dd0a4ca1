"""KIP-1251's assignment epochs (Kafka 4.3): a member of a consumer group whose heartbeat moved its
epoch while a commit was on the way is not refused for the partitions it kept. Each partition a
member holds carries the epoch it was assigned at; a commit with an older member epoch goes for the
partitions held since that epoch, and a commit naming any other partition (given up, or assigned
later), a newer epoch or an epoch before the partition came is refused whole (STALE_MEMBER_EPOCH).
Without it, Kafka's Java consumer's ``commitSync()`` fails with CommitFailedException in a
rebalance that Kafka 4.3 lets it through. The same scenario runs on Apache Kafka 4.3.1 in
tests/interop/test_commit_epochs.py."""

from __future__ import annotations

from tests.broker.coordinator.test_consumer_group import Member, broker  # noqa: F401 (broker: a fixture)
from tests.broker.coordinator.test_group_migration import ALL, OFFSET_COMMIT, Place, described, members
from tests.support.waiting import wait_until

STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID = 113, 25


def commit(member: Member, epoch: int, partitions: set[int]) -> list[int]:
    """An OffsetCommit v9 of ``partitions`` by ``member`` with ``epoch``: each partition's error."""
    body = {
        "group_id": member.group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member.member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": member.topic_name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                    for p in sorted(partitions)
                ],
            }
        ],
    }
    (topic,) = member.client.call(OFFSET_COMMIT, 9, body).topics
    return [int(p.error_code) for p in topic.partitions]


def settle(place: Place, *group: Member) -> None:
    """Heartbeat until the group is Stable and each member holds its target (Kafka 4.3 computes a
    target at most once a second, KIP-1263: it takes a few heartbeats there)."""

    def settled() -> bool:
        for member in group:
            assert member.heartbeat(owned=member.owned).error_code == 0
        state = members(group[0].client, place.group)
        return (
            described(group[0].client, place.group).group_state == "Stable"
            and set(state) == {member.member_id for member in group}
            and all(state[m.member_id][2] == m.owned == state[m.member_id][3] for m in group)
        )

    wait_until(settled, lambda: members(group[0].client, place.group), 30, interval=0.2)


def older_epoch_commits(place: Place) -> None:
    first = place.modern("first")
    assert first.join().error_code == 0
    settle(place, first)
    since = first.epoch
    assert first.owned == ALL
    second = place.modern("second")
    assert second.join().error_code == 0
    settle(place, first, second)
    moved = first.epoch
    assert moved > since and len(first.owned) == 3
    kept, gone = min(first.owned), min(ALL - first.owned)
    assert commit(first, since, {kept}) == [0]  # held since then
    assert commit(first, since, first.owned) == [0, 0, 0]
    assert commit(first, moved, {kept, gone}) == [0, 0]  # its own epoch commits any partition
    assert commit(first, since, {gone}) == [STALE_MEMBER_EPOCH]  # given up
    assert commit(first, since, {kept, gone}) == [STALE_MEMBER_EPOCH] * 2  # refused whole
    assert commit(first, since - 1, {kept}) == [STALE_MEMBER_EPOCH]  # before it had it
    assert commit(first, moved + 1, {kept}) == [STALE_MEMBER_EPOCH]  # newer than its own

    assert second.heartbeat(member_epoch=-1).error_code == 0  # leaves: first takes everything back
    second.close()
    settle(place, first)
    back = first.epoch
    assert back > moved and first.owned == ALL
    assert commit(first, moved, {gone}) == [STALE_MEMBER_EPOCH]  # its again, but only since `back`
    assert commit(first, back, {gone}) == [0]
    assert commit(first, since, {kept}) == [0]  # still held since the first epoch
    first.close()


def static_rejoin_commits(place: Place) -> None:
    """A static member that leaves for a while (epoch -2) and is back under a new member id holds
    its partitions from epoch 0 (Kafka's resetAssignedPartitionsEpochsToZero): the new member's
    older epochs commit them; the old member id commits nothing."""
    first = place.modern("first")
    assert first.join(instance_id="host-a").error_code == 0
    settle(place, first)
    epoch = first.epoch
    assert first.heartbeat(member_epoch=-2, instance_id="host-a").member_epoch == -2
    back = place.modern("first-again")
    answer = back.join(instance_id="host-a")
    assert (answer.error_code, answer.member_epoch, back.owned) == (0, epoch, ALL)
    assert commit(back, 0, ALL) == [0] * 6
    assert commit(first, epoch, {0}) == [UNKNOWN_MEMBER_ID]
    assert back.heartbeat(member_epoch=-1).error_code == 0
    first.close()
    back.close()


def test_an_older_epoch_commits_the_partitions_held_since_then(broker):
    older_epoch_commits(Place(broker))


def test_a_static_member_back_under_a_new_id_holds_its_partitions_from_epoch_0(broker):
    static_rejoin_commits(Place(broker))
