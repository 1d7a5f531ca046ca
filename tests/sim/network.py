"""The simulated network: every message the cores send goes through here.

It only decides *when* (if ever) a message arrives; the cluster puts the deliveries on the
event queue. Everything it does is drawn from the one `random.Random` it is given, so a seed
replays the same drops, duplicates and delays. Reordering needs no mechanism of its own:
two messages on the same link with independent delays arrive in either order.

Faults it models:
- loss: a message is dropped with probability `drop`;
- duplication: with probability `duplicate` a second copy travels with its own delay;
- delay: uniform in [min_delay_ms, max_delay_ms], and with probability `slow` a long one,
  up to `slow_max_ms`, which is how very late (stale) messages reach a node;
- partitions: the nodes are split into groups and nothing crosses between groups, plus
  one-way cuts (src can no longer reach dst, the other direction still works). A message is
  checked when sent and again when it would arrive: a partition that starts while it is in
  flight drops it, as a cut cable would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop: float = 0.0
    duplicate: float = 0.0
    slow: float = 0.0
    slow_max_ms: int = 2000

    def __post_init__(self) -> None:
        assert 0 <= self.min_delay_ms <= self.max_delay_ms <= self.slow_max_ms
        assert 0.0 <= self.drop <= 1.0 and 0.0 <= self.duplicate <= 1.0
        assert 0.0 <= self.slow <= 1.0


RELIABLE = NetworkConfig()


@dataclass(slots=True)
class NetworkStats:
    sent: int = 0
    dropped: int = 0  # lost at random
    cut: int = 0  # dropped by a partition or a one-way cut
    duplicated: int = 0


@dataclass(slots=True)
class Network:
    rng: random.Random
    config: NetworkConfig = RELIABLE
    stats: NetworkStats = field(default_factory=NetworkStats)
    # node -> index of its group while partitioned; empty when the network is whole.
    _group_of: dict[int, int] = field(default_factory=dict)
    _one_way_cuts: set[tuple[int, int]] = field(default_factory=set)
    # Scripted faults for scenario tests: a message any of these match is lost. A rule that
    # returns True once and False after drops exactly one message.
    drop_rules: list[Callable[[Any], bool]] = field(default_factory=list)

    # --- faults -----------------------------------------------------------------------------

    def partition(self, groups: Iterable[Iterable[int]]) -> None:
        """Splits the network; a node in no group is isolated from everyone."""
        self._group_of = {}
        for index, group in enumerate(groups):
            for node in group:
                assert node not in self._group_of, f"node {node} is in two groups"
                self._group_of[node] = index

    def cut_one_way(self, src: int, dst: int) -> None:
        self._one_way_cuts.add((src, dst))

    def heal(self) -> None:
        self._group_of = {}
        self._one_way_cuts = set()

    @property
    def whole(self) -> bool:
        return not self._group_of and not self._one_way_cuts

    def describe(self) -> str:
        if self.whole:
            return "whole"
        groups: dict[int, list[int]] = {}
        for node, index in sorted(self._group_of.items()):
            groups.setdefault(index, []).append(node)
        parts = [" | ".join(str(sorted(g)) for _, g in sorted(groups.items()))]
        parts += [f"{s}-x->{d}" for s, d in sorted(self._one_way_cuts)]
        return ", ".join(p for p in parts if p)

    # --- carrying messages ------------------------------------------------------------------

    def connected(self, src: int, dst: int) -> bool:
        if (src, dst) in self._one_way_cuts:
            return False
        if not self._group_of:
            return True
        # A node outside every group while the network is split is isolated.
        return self._group_of.get(src, -1 - src) == self._group_of.get(dst, -1 - dst)

    def delivery_times(self, message: Any, now_ms: int) -> list[int]:
        """When `message`, sent now, arrives: no time (lost), one, or two (duplicated).
        Always draws the same random numbers for the same state, so a seed replays exactly."""
        self.stats.sent += 1
        if not self.connected(message.src, message.dst):
            self.stats.cut += 1
            return []
        if self.drop_rules and any(rule(message) for rule in self.drop_rules):
            self.stats.dropped += 1
            return []
        rng, config = self.rng, self.config
        if config.drop and rng.random() < config.drop:
            self.stats.dropped += 1
            return []
        copies = 1
        if config.duplicate and rng.random() < config.duplicate:
            self.stats.duplicated += 1
            copies = 2
        return [now_ms + self._delay() for _ in range(copies)]

    def _delay(self) -> int:
        config = self.config
        if config.slow and self.rng.random() < config.slow:
            return self.rng.randint(config.max_delay_ms, config.slow_max_ms)
        return self.rng.randint(config.min_delay_ms, config.max_delay_ms)

    def arrives(self, src: int, dst: int) -> bool:
        """Whether a message in flight still gets through at its delivery time."""
        if self.connected(src, dst):
            return True
        self.stats.cut += 1
        return False
