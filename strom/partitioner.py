"""Which partition a record goes to, as Kafka's Java producer decides (so a key lands on the
same partition whichever client wrote it):

- an explicit partition wins;
- a keyed record goes to `toPositive(murmur2(key)) % partitions` (Kafka's
  BuiltInPartitioner.partitionForKey, with Utils.murmur2 and its seed 0x9747b28c);
- a keyless record goes to the current "sticky" partition of its topic, which changes only
  when the batch being filled there is sent (KIP-480), so keyless records fill whole
  batches instead of spreading one record over every partition.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: MurmurHash2, 32 bits, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Keyless records' partition per topic: kept until `batch_sent` says the batch it was
    filling left, then a new one is drawn among the partitions with a leader (all of them
    when none has one), never the same one twice in a row when there is a choice."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, partitions: int, available: Sequence[int] = ()) -> int:
        current = self._current.get(topic)
        if current is None or current >= partitions:
            current = self._current[topic] = self._draw(partitions, available, None)
        return current

    def batch_sent(
        self, topic: str, partition: int, partitions: int, available: Sequence[int] = ()
    ) -> None:
        if self._current.get(topic) == partition:
            self._current[topic] = self._draw(partitions, available, partition)

    def _draw(self, partitions: int, available: Sequence[int], previous: int | None) -> int:
        choices = [p for p in available if p < partitions] or list(range(partitions))
        if previous is not None and len(choices) > 1:
            choices = [p for p in choices if p != previous]
        return self.rng.choice(choices)
