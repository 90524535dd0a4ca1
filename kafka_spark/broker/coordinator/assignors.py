"""The consumer protocol's server-side assignors (KIP-848's ``group.consumer.assignors``):
``uniform`` (the default) and ``range``. Pure functions of the members' subscriptions, the
subscribed topics' partition counts and the previous target assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: The assignors this coordinator has (group.consumer.assignors), the default first.
ASSIGNORS = ("uniform", "range")

Assignment = dict[str, frozenset[int]]  # topic name -> partitions


def uniform_assignment(
    subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Every partition of a subscribed topic to one member subscribing to it, balanced (counts
    differ by at most one between members that could swap a partition) and sticky: a member keeps
    the partitions of its previous target that it still may have, except what balancing moves."""
    owned: dict[str, set[tuple[str, int]]] = {member: set() for member in subscriptions}
    taken: set[tuple[str, int]] = set()
    for member, assignment in previous.items():
        if member not in subscriptions:
            continue
        for topic, indexes in assignment.items():
            if topic in subscriptions[member] and topic in partitions:
                for index in indexes:
                    if index < partitions[topic] and (topic, index) not in taken:
                        owned[member].add((topic, index))
                        taken.add((topic, index))
    eligible = {
        (topic, index): sorted(m for m, topics in subscriptions.items() if topic in topics)
        for topic, count in partitions.items()
        for index in range(count)
    }
    for key in sorted(eligible):
        if key not in taken and eligible[key]:
            member = min(eligible[key], key=lambda m: (len(owned[m]), m))
            owned[member].add(key)
            taken.add(key)
    # Balance: move a partition from a member with more to an eligible one with at least two fewer.
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for key in sorted(owned[giver]):
                taker = min(eligible[key], key=lambda m: (len(owned[m]), m))
                if len(owned[taker]) + 1 < len(owned[giver]):
                    owned[giver].remove(key)
                    owned[taker].add(key)
                    moved = True
                    break
            if moved:
                break
    return {member: _grouped(keys) for member, keys in owned.items()}


def range_assignment(
    subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Per topic, its partitions in contiguous ranges over the members subscribing to it, in
    member id order (the first ones get one more when they do not divide evenly)."""
    owned: dict[str, set[tuple[str, int]]] = {member: set() for member in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for position, member in enumerate(members):
            size = share + (1 if position < extra else 0)
            owned[member].update((topic, index) for index in range(start, start + size))
            start += size
    return {member: _grouped(keys) for member, keys in owned.items()}


def _grouped(keys: Iterable[tuple[str, int]]) -> Assignment:
    grouped: dict[str, set[int]] = {}
    for topic, index in keys:
        grouped.setdefault(topic, set()).add(index)
    return {topic: frozenset(indexes) for topic, indexes in grouped.items()}
