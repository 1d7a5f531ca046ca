"""Seeded runs of the group coordinator's core: random members join, sync, heartbeat, leave
and commit, appends succeed or fail in random order, and time moves only to the wake-ups the
core asked for, as its pump's timer does. After every step the group's invariants hold; at
the end (appends done, nobody talking) every request has been answered by the wake-ups
alone, so no client waits forever. A failure names its seed.
"""

from __future__ import annotations

import itertools
import random

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.core import GroupCoordinatorCore
from coordinator.group.messages import (
    CommittedOffset,
    Effects,
    Heartbeat,
    JoinGroup,
    JoinResult,
    LeaveGroup,
    LeavingMember,
    MemberIdRequired,
    OffsetCommit,
    SyncGroup,
)
from coordinator.group.state import GroupState
from metadata.errors import ApiError

SEEDS = range(150)
STEPS = 60
SESSION = 10_000
REBALANCE_TIMEOUTS = (1000, 20_000)
DELAYS = (0, 3000)
# Once nobody talks, the longest wait: a follower's SyncGroup waits for its silent leader's
# session to run out, and the rebalance that follows ends by the longest rebalance timeout.
QUIET_BOUND_MS = SESSION + max(REBALANCE_TIMEOUTS) + max(DELAYS) + 10
APPEND_ERRORS = ("NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT")


class Run:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 1_000_000
        uuids = (f"u{i}" for i in itertools.count())
        self.core = GroupCoordinatorCore(
            1,
            GroupConfig(initial_rebalance_delay_ms=self.rng.choice(DELAYS)),
            lambda topic: 1 if topic == "__consumer_offsets" else 4,  # every group on 0
            self.now,
            lambda: next(uuids),
        )
        self.ids = itertools.count(1)
        self.waiting: set[int] = set()
        self.appends: list[int] = []
        self.timer: int | None = None
        self.known: dict[str, int] = {}  # member id -> the generation it last joined
        assert self.core.begin_load(0)
        self.take(self.core.load_finished(0, self.now))

    def take(self, effects: Effects) -> None:
        for response in effects.responses:
            assert response.request in self.waiting, f"{response.request} answered twice"
            self.waiting.discard(response.request)
            self.learn(response.answer, response.error)
        self.appends += [a.write for a in effects.appends]
        if effects.wakeup_ms is not None and (self.timer is None or effects.wakeup_ms < self.timer):
            self.timer = effects.wakeup_ms

    def learn(self, answer: object, error: ApiError | None) -> None:
        if isinstance(error, MemberIdRequired):
            self.known.setdefault(error.member_id, -1)
        elif isinstance(answer, JoinResult):
            self.known[answer.member_id] = answer.generation_id

    def send(self, handler: str, message: object) -> None:
        request = next(self.ids)
        self.waiting.add(request)
        self.take(getattr(self.core, handler)(request, message, self.now))

    def advance(self, to: int) -> None:
        """The pump's timer: tick at each wake-up asked for up to `to`, then stand at `to`."""
        while self.timer is not None and self.timer <= to:
            self.now, self.timer = max(self.now, self.timer), None
            self.take(self.core.tick(self.now))
        self.now = to

    def finish_append(self, fail: bool) -> None:
        write = self.appends.pop(self.rng.randrange(len(self.appends)))
        error = ApiError(self.rng.choice(APPEND_ERRORS), "injected") if fail else None
        self.take(self.core.append_done(write, error, self.now))

    def member(self) -> str:
        """Mostly a member the group has now (the leader half the time), else any id seen."""
        group = self.core.groups.get("g")
        live = sorted(group.members) if group is not None else []
        if live and self.rng.random() < 0.8:
            if group.leader in live and self.rng.random() < 0.5:
                return group.leader
            return self.rng.choice(live)
        return self.rng.choice(sorted(self.known)) if self.known else ""

    def step(self) -> None:
        rng = self.rng
        action = rng.choice(
            ["join", "static", "sync", "sync", "sync", "beat", "beat", "leave", "commit",
             "append", "append", "time"]
        )
        member = self.member()
        generation = self.known.get(member, -1)
        if action in ("join", "static"):
            instance = f"i-{rng.randrange(2)}" if action == "static" else None
            member_id = "" if action == "static" or rng.random() < 0.3 else member
            protocols = (("range", b""),) if rng.random() < 0.9 else (("roundrobin", b""),)
            self.send(
                "join_group",
                JoinGroup(
                    "g", member_id, instance, "c", "h", SESSION,
                    rng.choice(REBALANCE_TIMEOUTS), "consumer", protocols,
                ),
            )
        elif action == "sync":
            assignments = {m: b"a" for m in self.known} if rng.random() < 0.8 else {}
            self.send("sync_group", SyncGroup("g", member, generation, assignments))
        elif action == "beat":
            self.send("heartbeat", Heartbeat("g", member, generation))
        elif action == "leave":
            self.send("leave_group", LeaveGroup("g", (LeavingMember(member, ""),)))
        elif action == "commit":
            who = ("", -1) if rng.random() < 0.3 else (member, generation)
            offsets = (CommittedOffset("t", rng.randrange(5), 7, 0, ""),)
            self.send("commit_offsets", OffsetCommit("g", *who, offsets))
        elif action == "append" and self.appends:
            self.finish_append(fail=rng.random() < 0.3)
        elif rng.random() < 0.8:
            self.advance(self.now + rng.randrange(0, SESSION // 3))
        else:  # long enough for sessions and rebalances to run out
            self.advance(self.now + rng.randrange(SESSION, 3 * SESSION))

    def check(self) -> None:
        group = self.core.groups.get("g")
        if group is None:
            return
        members = group.members.values()
        if group.state is GroupState.EMPTY:
            assert not group.members
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.leader in group.members
            assert all(m.join_request is None for m in members)
        if group.state is GroupState.STABLE:
            assert all(m.sync_request is None for m in members)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            assert all(m.sync_request is None for m in members)
        assert set(group.static_members.values()) <= set(group.members)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_group_traffic_keeps_the_rules_and_answers_everyone(seed):
    run = Run(seed)
    for _ in range(STEPS):
        run.step()
        run.check()
    # Liveness: the appends complete, nobody sends anything more, and the clock moves only
    # to the wake-ups the core asks for; each wait ends within its timeouts.
    quiet_since = run.now
    for _ in range(100):
        while run.appends:
            run.finish_append(fail=False)
            run.check()
        if not run.waiting:
            break
        assert run.timer is not None, f"seed {seed}: requests {run.waiting} wait, no wake-up"
        run.advance(run.timer)
        run.check()
    assert not run.waiting, f"seed {seed}: requests {sorted(run.waiting)} never answered"
    assert run.now - quiet_since <= QUIET_BOUND_MS, f"seed {seed}: answered late, at {run.now}"


def test_the_seeds_reach_every_state_with_several_members():
    reached: set[GroupState] = set()
    crowded = 0
    for seed in SEEDS:
        run = Run(seed)
        for _ in range(STEPS):
            run.step()
            group = run.core.groups.get("g")
            if group is not None:
                reached.add(group.state)
                crowded += len(group.members) > 1 and group.state is GroupState.STABLE
    assert reached >= set(GroupState) - {GroupState.DEAD}
    assert crowded > 0  # a Stable group of more than one member
