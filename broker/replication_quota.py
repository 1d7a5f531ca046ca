"""Replication throttles (Kafka's KIP-73 ReplicationQuotaManager), without I/O: which
replicas are throttled, and a token bucket for the bytes/s they may move.

A broker has two quotas: the leader's (`leader.replication.throttled.rate`, the bytes/s it
serves to followers' fetches of the partitions in `leader.replication.throttled.replicas`)
and the follower's (`follower.replication.throttled.rate`, the bytes/s it fetches for the
partitions in `follower.replication.throttled.replicas`). Kafka's rules, which the fetch
paths apply (broker/replica_manager.py for the leader, broker/follower_fetch.py for the
follower):
- a throttled partition is checked before it is read: while the quota is exceeded it is
  left out of the fetch (follower) or answered without records (leader); the other
  partitions of the same fetch are not delayed;
- a replica already in sync (in the ISR, for the leader; caught up with the leader's high
  watermark, for the follower) is never left out, so a throttle cannot shrink an ISR;
- the bytes of every throttled partition are recorded after they moved (in sync or not), so
  one fetch may overshoot the rate; the next ones wait until the bucket has paid for it.

The bucket (Kafka measures a rate over 11 one-second windows; a bucket says the same with
less state, and tells how long until the next byte may move, which the fetch paths sleep
for instead of polling): it holds at most one second of the rate, starts empty (a
throttle set for a reassignment limits it from its first byte; Kafka's fresh windowed rate
lets a first burst of several seconds through), and the quota is exceeded while it is in
debt. A rate of Long.MAX_VALUE (Kafka's default) is no throttle.

Not thread-safe: the broker's event loop owns it. The clock (seconds, monotonic) is passed
in so that tests move time by hand.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

UNLIMITED = 2**63 - 1  # Kafka's QuotaConfigs.QUOTA_BYTES_PER_SECOND_DEFAULT
BURST_S = 1.0  # the bucket's capacity, in seconds of the rate
# The longest a fetch path sleeps on the quota before looking again, so that a rate raised
# meanwhile (or a rate of 0, which never pays a debt) applies within a second.
MAX_DELAY_S = 1.0

_PAIR = re.compile(r"^(\d+):(\d+)$")


class AllPartitions:
    """ "*": every partition of the topic."""

    def __contains__(self, partition: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "*"


ALL = AllPartitions()
Partitions = frozenset[int] | AllPartitions


def throttled_partitions(value: str, broker_id: int) -> Partitions:
    """The partitions a `*.replication.throttled.replicas` value throttles on `broker_id`
    (Kafka's parseThrottledPartitions): "*" all of them, else those listed with this broker
    ("0:101,1:102" throttles partition 0 on broker 101). Anything that is not a pair is
    skipped; the controller refused such values already."""
    text = value.replace(" ", "")
    if text == "*":
        return ALL
    partitions = set()
    for item in text.split(","):
        match = _PAIR.match(item)
        if match is not None and int(match.group(2)) == broker_id:
            partitions.add(int(match.group(1)))
    return frozenset(partitions)


@dataclass(slots=True)
class QuotaStats:
    recorded_bytes: int = 0  # bytes of throttled partitions moved (Kafka's byte-rate sensor)
    left_out: int = 0  # partitions left out of a fetch because the quota was exceeded


class ReplicationQuota:
    """One side's quota: the rate, the bucket, and the throttled partitions per topic."""

    def __init__(self, rate: int = UNLIMITED, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.rate = rate
        self.tokens = 0.0
        self.updated = clock()
        self.stats = QuotaStats()
        self._throttled: dict[str, Partitions] = {}

    # --- which partitions -----------------------------------------------------------------

    def mark_throttled(self, topic: str, partitions: Partitions) -> None:
        if partitions is ALL or partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def set_throttled(self, throttled: Iterable[tuple[str, Partitions]]) -> None:
        """Replaces every topic's throttled partitions."""
        self._throttled = {}
        for topic, partitions in throttled:
            self.mark_throttled(topic, partitions)

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self._throttled.get(topic)
        return partitions is not None and partition in partitions

    @property
    def throttles_any(self) -> bool:
        """Whether any partition is throttled at all (else no partition needs a look)."""
        return bool(self._throttled)

    def throttled_topics(self) -> dict[str, Partitions]:
        return dict(self._throttled)

    # --- the bucket -----------------------------------------------------------------------

    @property
    def unlimited(self) -> bool:
        return self.rate >= UNLIMITED

    def update_rate(self, rate: int) -> None:
        """A new bound (bytes/s); the debt or credit so far is kept, within the new size."""
        self._refill()
        self.rate = rate
        if not self.unlimited:
            self.tokens = min(self.tokens, rate * BURST_S)

    def exceeded(self) -> bool:
        if self.unlimited:
            return False
        self._refill()
        return self.tokens < 0

    def record(self, size: int) -> None:
        """`size` bytes of throttled partitions moved."""
        self.stats.recorded_bytes += size
        if self.unlimited:
            return
        self._refill()
        self.tokens -= size

    def delay_s(self) -> float:
        """Seconds until the quota is no longer exceeded (0 when it is not), at most
        MAX_DELAY_S."""
        if not self.exceeded():
            return 0.0
        return min(-self.tokens / self.rate, MAX_DELAY_S) if self.rate > 0 else MAX_DELAY_S

    def should_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: leave this partition's
        records out of the fetch now."""
        if in_sync or not self.is_throttled(topic, partition) or not self.exceeded():
            return False
        self.stats.left_out += 1
        return True

    def _refill(self) -> None:
        now = self.clock()
        elapsed = max(now - self.updated, 0.0)
        self.updated = now
        if not self.unlimited:
            self.tokens = min(self.tokens + elapsed * self.rate, self.rate * BURST_S)
