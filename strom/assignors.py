"""Partition assignors, run by the group leader (Kafka's ConsumerPartitionAssignor), and the
consumer protocol's subscription and assignment bytes in Kafka's layout.

- range: per topic, members in order get contiguous ranges; the first (partitions %
  members) get one more (Kafka's RangeAssignor).
- roundrobin: all partitions of all topics in order, dealt to the members in turn (each
  partition to the next member subscribed to its topic).
- sticky: balanced (loads differ by at most one among members with the same topics) and
  keeps as many partitions as possible where they were (Kafka's StickyAssignor).
- cooperative-sticky: sticky's target, except a partition moving between members is first
  only taken from its owner; the owner gives it up, the group rebalances again, and it is
  given to the new member (KIP-429), so partitions that stay never stop being consumed.

Subscription (version 1): topics, user data, owned partitions, generation (v2). Assignment
(version 1): partitions, user data. Both as Kafka's ConsumerProtocol encodes them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopicPartitions = dict[str, list[int]]
EAGER, COOPERATIVE = "eager", "cooperative"


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: tuple[tuple[str, int], ...] = ()
    generation: int = -1
    user_data: bytes = b""


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[tuple[str, int], ...] = ()
    user_data: bytes = b""


# --- Kafka's ConsumerProtocol bytes ----------------------------------------------------


def _string(out: bytearray, text: str) -> None:
    data = text.encode()
    out += struct.pack(">h", len(data)) + data


def _partitions(out: bytearray, tps: Sequence[tuple[str, int]]) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    out += struct.pack(">i", len(by_topic))
    for topic, parts in sorted(by_topic.items()):
        _string(out, topic)
        out += struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in sorted(parts))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        n = self.take(">h")
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def bytes_(self) -> bytes:
        n = self.take(">i")
        if n < 0:
            return b""
        data = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(data)

    def partitions(self) -> list[tuple[str, int]]:
        out = []
        for _ in range(self.take(">i")):
            topic = self.string()
            out += [(topic, self.take(">i")) for _ in range(self.take(">i"))]
        return out

    def more(self) -> bool:
        return self.pos < len(self.data)


def encode_subscription(s: Subscription) -> bytes:
    out = bytearray(struct.pack(">h", 2))
    out += struct.pack(">i", len(s.topics))
    for topic in s.topics:
        _string(out, topic)
    out += struct.pack(">i", len(s.user_data)) + s.user_data
    _partitions(out, s.owned)
    out += struct.pack(">i", s.generation)
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.take(">h")
    topics = tuple(r.string() for _ in range(r.take(">i")))
    user_data = r.bytes_() if r.more() else b""
    owned = tuple(r.partitions()) if version >= 1 and r.more() else ()
    generation = r.take(">i") if version >= 2 and r.more() else -1
    return Subscription(topics, owned, generation, user_data)


def encode_assignment(a: Assignment) -> bytes:
    out = bytearray(struct.pack(">h", 1))
    _partitions(out, a.partitions)
    out += struct.pack(">i", len(a.user_data)) + a.user_data
    return bytes(out)


class MalformedAssignment(ValueError):
    """Bytes that are not a ConsumerProtocolAssignment."""


def decode_assignment(data: bytes) -> Assignment:
    """A ConsumerProtocolAssignment (any version); MalformedAssignment if it is not one."""
    if not data:
        return Assignment()
    r = _Reader(data)
    try:
        r.take(">h")
        partitions = tuple(r.partitions())
        user_data = r.bytes_() if r.more() else b""
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedAssignment(f"{len(data)} bytes that do not read as one ({exc})") from None
    return Assignment(partitions, user_data)


# --- the assignors ---------------------------------------------------------------------


@dataclass
class Assignor:
    name: str = ""
    protocol: str = EAGER

    def assign(
        self, partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[tuple[str, int]]]:
        raise NotImplementedError


def _members_of(topic: str, subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(m for m, s in subscriptions.items() if topic in s.topics)


@dataclass
class RangeAssignor(Assignor):
    name: str = "range"

    def assign(
        self, partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
        topics = sorted({t for s in subscriptions.values() for t in s.topics if t in partitions})
        for topic in topics:
            members = _members_of(topic, subscriptions)
            count = partitions[topic]
            per, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                n = per + (1 if i < extra else 0)
                out[member] += [(topic, p) for p in range(start, start + n)]
                start += n
        return out


@dataclass
class RoundRobinAssignor(Assignor):
    name: str = "roundrobin"

    def assign(
        self, partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions)
        topics = sorted({t for s in subscriptions.values() for t in s.topics if t in partitions})
        turn = 0
        for topic in topics:
            for p in range(partitions[topic]):
                for _ in range(len(members)):
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscriptions[member].topics:
                        out[member].append((topic, p))
                        break
        return out


@dataclass
class StickyAssignor(Assignor):
    name: str = "sticky"

    def assign(
        self, partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[tuple[str, int]]]:
        owners = _previous_owners(partitions, subscriptions)
        out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
        for tp, member in owners.items():
            out[member].append(tp)
        everything = sorted(
            (t, p)
            for t in {t for s in subscriptions.values() for t in s.topics if t in partitions}
            for p in range(partitions[t])
        )
        # Members over their fair share give up their newest extras first.
        loads = _fair_loads(everything, subscriptions)
        for member, assigned in out.items():
            while len(assigned) > loads[member]:
                assigned.pop()
        taken = {tp for assigned in out.values() for tp in assigned}
        for tp in everything:
            if tp in taken:
                continue
            candidates = _members_of(tp[0], subscriptions)
            best = min(candidates, key=lambda m: (len(out[m]) - loads[m], len(out[m]), m))
            out[best].append(tp)
        _balance(out, subscriptions)
        return {m: sorted(tps) for m, tps in out.items()}


@dataclass
class CooperativeStickyAssignor(StickyAssignor):
    name: str = "cooperative-sticky"
    protocol: str = COOPERATIVE

    def assign(
        self, partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[tuple[str, int]]]:
        target = super().assign(partitions, subscriptions)
        owners = _previous_owners(partitions, subscriptions)
        # KIP-429: a partition changing hands is withheld this round; its owner revokes it.
        return {
            member: [tp for tp in tps if owners.get(tp, member) == member]
            for member, tps in target.items()
        }


ASSIGNORS: dict[str, type[Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def by_name(name: str) -> Assignor:
    aliases = {
        "org.apache.kafka.clients.consumer.RangeAssignor": "range",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
        "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    }
    key = aliases.get(name, name)
    if key not in ASSIGNORS:
        raise ValueError(
            f"unknown partition assignment strategy {name!r}: use range, roundrobin, sticky "
            "or cooperative-sticky"
        )
    return ASSIGNORS[key]()


def _previous_owners(
    partitions: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[tuple[str, int], str]:
    """Who owned each partition that still exists and is still subscribed by its owner; a
    partition claimed twice goes to the claim of the higher generation."""
    owners: dict[tuple[str, int], tuple[int, str]] = {}
    for member, s in subscriptions.items():
        for topic, p in s.owned:
            if topic in s.topics and topic in partitions and p < partitions[topic]:
                claim = owners.get((topic, p))
                if claim is None or s.generation > claim[0]:
                    owners[(topic, p)] = (s.generation, member)
    return {tp: member for tp, (_, member) in owners.items()}


def _fair_loads(
    everything: list[tuple[str, int]], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """Each member's share: the partitions it can take, spread evenly (ceil) over the
    members that can take them, computed greedily."""
    counts = {m: 0 for m in subscriptions}
    for tp in everything:
        candidates = _members_of(tp[0], subscriptions)
        best = min(candidates, key=lambda m: (counts[m], m))
        counts[best] += 1
    return counts


def _balance(
    out: dict[str, list[tuple[str, int]]], subscriptions: Mapping[str, Subscription]
) -> None:
    """Moves partitions from the most to the least loaded member that may take them until
    no move makes the loads more even."""
    moved = True
    while moved:
        moved = False
        for heavy in sorted(out, key=lambda m: -len(out[m])):
            for light in sorted(out, key=lambda m: len(out[m])):
                if len(out[heavy]) - len(out[light]) <= 1:
                    continue
                for tp in reversed(out[heavy]):
                    if tp[0] in subscriptions[light].topics:
                        out[heavy].remove(tp)
                        out[light].append(tp)
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break


def group_by_topic(tps: Sequence[tuple[str, int]]) -> TopicPartitions:
    out: TopicPartitions = {}
    for topic, p in tps:
        out.setdefault(topic, []).append(p)
    return out


__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Assignor",
    "Subscription",
    "by_name",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]
