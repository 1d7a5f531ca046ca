"""Which partition a record goes to, as Kafka's Java producer decides (so a key lands on the
same partition whichever client wrote it):

- an explicit partition wins;
- a keyed record goes to `toPositive(murmur2(key)) % partitions` (Kafka's
  BuiltInPartitioner.partitionForKey, with Utils.murmur2 and its seed 0x9747b28c), unless
  partitioner.ignore.keys;
- a keyless record goes to its topic's current "sticky" partition (KIP-794's uniform sticky
  partitioner, Kafka's BuiltInPartitioner): the producer moves on after batch.size bytes
  went there (once the partition's last batch is full, or after twice batch.size whatever
  it holds), so keyless records fill whole batches and every partition gets its share. The
  next partition is drawn at random among those with a leader; with
  partitioner.adaptive.partitioning.enable (the default) it is weighted by how few batches
  each partition has queued, so partitions whose broker keeps up take more, and with
  partitioner.availability.timeout.ms > 0 a partition whose leader took nothing for that
  long while batches waited is left out.
"""

from __future__ import annotations

import bisect
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


class UniformStickyPartitioner:
    """Keyless records' partition per topic (Kafka's BuiltInPartitioner, KIP-794).

    The caller's thread calls `partition` and `appended` for each keyless record; the I/O
    thread calls `update_load` with the queue sizes it sees as it drains. The load stats
    are replaced whole (one reference), never changed in place, so no lock is needed; a
    record counted while another thread switches the partition may count towards the new
    one, which only moves a switch by a record."""

    def __init__(
        self, batch_size: int, adaptive: bool = True, rng: random.Random | None = None
    ) -> None:
        self.batch_size = max(batch_size, 1)
        self.adaptive = adaptive
        self.rng = rng or random.Random()
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes produced]
        # topic -> (cumulative frequency table, its partitions): weights from queue sizes
        self._load: dict[str, tuple[list[int], list[int]]] = {}

    def partition(self, topic: str, partitions: int, available: Sequence[int] = ()) -> int:
        sticky = self._sticky.get(topic)
        if sticky is None or sticky[0] >= partitions:
            sticky = self._sticky[topic] = [self._next(topic, partitions, available), 0]
        return sticky[0]

    def appended(self, topic: str, partition: int, size: int, batch_full: bool) -> None:
        """A record of `size` bytes went to `partition`; `batch_full`: the partition's last
        batch is full (no half-filled batch is left behind by switching now)."""
        sticky = self._sticky.get(topic)
        if sticky is None or sticky[0] != partition:
            return
        sticky[1] += size
        # Kafka's rule: switch after batch.size bytes, but not while that would leave a
        # batch half full (linger.ms would then send it small), and always after twice that.
        if (batch_full and sticky[1] >= self.batch_size) or sticky[1] >= 2 * self.batch_size:
            del self._sticky[topic]

    def update_load(
        self, topic: str, queue_sizes: Sequence[tuple[int, int]], partitions: int
    ) -> None:
        """`queue_sizes`: (partition, batches queued) for the partitions that may take
        records now (a leader, and not left out by partitioner.availability.timeout.ms), of
        the topic's `partitions`. Kafka's updatePartitionLoadStats: the inverted sizes as a
        cumulative frequency table; none when every partition is in and all are equal."""
        if not self.adaptive:
            return
        sizes = [size for _, size in queue_sizes]
        if partitions < 2 or not sizes or (len(sizes) == partitions and min(sizes) == max(sizes)):
            self._load.pop(topic, None)
            return
        top = max(sizes) + 1
        table, running = [], 0
        for size in sizes:
            running += top - size
            table.append(running)
        self._load[topic] = (table, [p for p, _ in queue_sizes])

    def loaded_topics(self) -> list[str]:
        return list(self._load)

    def _next(self, topic: str, partitions: int, available: Sequence[int]) -> int:
        draw = self.rng.getrandbits(31)
        load = self._load.get(topic)
        if load is not None:
            table, ids = load
            if all(p < partitions for p in ids):
                return ids[bisect.bisect_right(table, draw % table[-1])]
        choices = [p for p in available if p < partitions] or range(partitions)
        return choices[draw % len(choices)]


class LeaderWaits:
    """Per broker, when it last had batches waiting to be sent and when it last took some
    (Kafka's NodeLatencyStats, readyTimeMs and drainTimeMs): with
    partitioner.availability.timeout.ms > 0, the partitions of a broker that took nothing for
    longer than that while batches waited are left out of the adaptive choice."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._waiting: dict[int, float] = {}
        self._drained: dict[int, float] = {}
        self._looked: float | None = None

    def looked(self, now: float) -> None:
        """Called at each drain, before `observed`. A gap longer than the timeout since the
        last drain is a pause of this process (a full garbage collection, a starved I/O
        thread), not of the brokers: it counts towards no broker's time without taking
        batches. Counted, it made every leader look stalled at once after a pause, and with
        none left the keyless records went to every partition again, the paused broker's
        too."""
        if self._looked is not None and now - self._looked > self.timeout_s:
            gap = now - self._looked
            for leader in self._drained:
                self._drained[leader] += gap
        self._looked = now

    def observed(self, leader: int, drained: bool, now: float) -> None:
        """`leader` had batches queued at `now`; `drained`: it took some."""
        self._waiting[leader] = now
        if drained or leader not in self._drained:
            self._drained[leader] = now

    def stalled(self, leader: int) -> bool:
        if not self.timeout_s or leader not in self._waiting:
            return False
        return self._waiting[leader] - self._drained[leader] > self.timeout_s
