"""Scripted fault scenarios on the simulated cluster, each with a bound on how long it may take.

Unlike the seeded runs, each test causes one fault on purpose and asserts the outcome Raft
promises for it. The invariants of invariants.py are checked after every event here too.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from raft.config import RaftConfig
from raft.messages import (
    NO_LEADER,
    SNAPSHOT_NOT_FOUND,
    ElectionState,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    Ready,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from raft.roles import Role
from tests.sim.cluster import CrashPoint, SimNode
from tests.sim.scenario import (
    applied_everywhere,
    make_world,
    propose,
    snapshot,
    stable_leader,
    try_propose,
    wait_for,
)
from tests.sim.world import World

CONFIG = RaftConfig()
# A leader ticks every request_timeout/4, so it notices a lost quorum up to that much late.
LEADER_TICK_MS = CONFIG.request_timeout_ms // 4
# From losing the leader to a new one: the fetch timeout, then at most two election timeouts
# (a randomised timeout in [T, 2T)), plus round trips.
FAILOVER_BOUND_MS = CONFIG.fetch_timeout_ms + 2 * CONFIG.election_timeout_ms + 500


def _records(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def _others(world_ids: list[int], node_id: int) -> list[int]:
    return [i for i in world_ids if i != node_id]


def _lose_next_fetch_response(world: World, dst: int) -> list[FetchResponse]:
    """Makes the network drop the next FetchResponse to `dst`; the list holds it once lost."""
    lost: list[FetchResponse] = []

    def lose_one(m: object) -> bool:
        if not lost and isinstance(m, FetchResponse) and m.dst == dst:
            lost.append(m)
            return True
        return False

    world.network.drop_rules.append(lose_one)
    return lost


def test_leader_partitioned_away_is_replaced_and_steps_down_by_check_quorum() -> None:
    world = make_world(voters=3)
    old = stable_leader(world)
    assert old.core is not None
    old_epoch = old.core.epoch
    rest = _others(sorted(world.cluster.nodes), old.node_id)
    world.network.partition([[old.node_id], rest])
    world.trace.record(f"scenario: isolate leader {old.node_id}")

    def replaced() -> bool:
        new = world.leader()
        return new is not None and new.node_id in rest and new.core is not None

    wait_for(world, replaced, FAILOVER_BOUND_MS, "a new leader on the majority side")
    new = world.leader()
    assert new is not None and new.core is not None and new.core.epoch > old_epoch

    # Cut off, the old leader cannot learn of the new epoch: only check-quorum unseats it.
    bound = CONFIG.check_quorum_timeout_ms + LEADER_TICK_MS
    wait_for(
        world,
        lambda: old.core is not None and old.core.role is not Role.LEADER,
        bound,
        "the isolated leader resigning by check-quorum",
    )
    assert world.roles()[old.node_id] is Role.RESIGNED and old.core.epoch == old_epoch

    world.network.heal()
    records = _records("after-heal", 5)
    propose(world, records, new.node_id)
    wait_for(
        world,
        applied_everywhere(world, records, sorted(world.cluster.nodes)),
        5_000,
        "the old leader rejoining and applying the new records",
    )
    assert world.roles()[old.node_id] is Role.FOLLOWER and old.core.leader_id == new.node_id


def test_kill_the_leader_fails_over_and_the_old_leader_catches_up() -> None:
    world = make_world(voters=3, seed=2)
    old = stable_leader(world)
    before = _records("before", 10)
    propose(world, before)
    ids = sorted(world.cluster.nodes)
    wait_for(world, applied_everywhere(world, before, ids), 2_000, "records before the crash")

    world.cluster.crash(old.node_id)
    world.after_event()
    rest = _others(ids, old.node_id)
    wait_for(world, lambda: world.leader() is not None, FAILOVER_BOUND_MS, "a new leader")
    after = _records("after", 10)
    propose(world, after)
    wait_for(
        world, applied_everywhere(world, before + after, rest), 2_000, "the survivors committing"
    )

    world.cluster.restart(old.node_id)
    world.after_event()
    wait_for(
        world,
        applied_everywhere(world, before + after, ids),
        5_000,
        "the restarted leader catching up",
    )


@pytest.mark.parametrize("torn", [False, True], ids=["clean", "torn"])
def test_minority_crash_losing_unsynced_writes(torn: bool) -> None:
    """Two of five followers lose power between appending fetched entries and syncing them:
    the entries vanish (or, torn, partly survive) and the three others carry on committing."""
    world = make_world(voters=5, seed=3)
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    victims = _others(ids, leader.node_id)[:2]
    for victim in victims:
        world.cluster.arm_crash(victim, CrashPoint.BEFORE_LOG_SYNC, torn=torn)
    ends_before = {v: world.cluster.nodes[v].log.end_offset() for v in victims}
    first = _records("first", 20)
    propose(world, first)
    wait_for(
        world,
        lambda: all(not world.cluster.nodes[v].up for v in victims),
        1_000,
        "the victims losing power",
    )
    if not torn:
        # Every victim crashed on the Ready that appended the new records: they are gone.
        for victim in victims:
            assert world.cluster.nodes[victim].log.end_offset() == ends_before[victim]

    survivors = _others(_others(ids, victims[0]), victims[1])
    second = _records("second", 20)
    propose(world, second)
    wait_for(
        world,
        applied_everywhere(world, first + second, survivors),
        2_000,
        "a majority committing without the victims",
    )
    for victim in victims:
        world.cluster.restart(victim)
    world.after_event()
    wait_for(
        world,
        applied_everywhere(world, first + second, ids),
        5_000,
        "the victims catching up after restart",
    )


def test_graceful_resign_hands_over_to_the_most_caught_up_voter() -> None:
    world = make_world(voters=5, seed=4)
    old = stable_leader(world)
    assert old.core is not None and old.core.leader is not None
    ids = sorted(world.cluster.nodes)
    laggard = _others(ids, old.node_id)[0]
    # The laggard hears nothing from the leader for a while (less than its fetch timeout).
    world.network.drop_rules.append(lambda m: isinstance(m, FetchResponse) and m.dst == laggard)
    records = _records("while-lagging", 10)
    propose(world, records)
    caught_up = _others(_others(ids, old.node_id), laggard)
    wait_for(
        world,
        applied_everywhere(world, records, [old.node_id, *caught_up]),
        1_000,
        "the others applying the records",
    )
    successors = old.core.leader.successors_by_progress()
    assert successors[-1] == laggard, successors

    old_epoch = old.core.epoch
    world.cluster.resign(old.node_id)
    world.after_event()
    took = wait_for(
        world,
        lambda: world.leader() is not None,
        CONFIG.election_timeout_ms,
        "a successor elected within one election timeout",
    )
    new = world.leader()
    assert new is not None and new.core is not None
    assert new.node_id == successors[0], (new.node_id, successors)
    assert new.core.epoch == old_epoch + 1, "more than one election round"
    assert took < CONFIG.election_timeout_ms
    world.network.drop_rules.clear()


def test_observer_follows_and_applies_everything_but_never_votes() -> None:
    world = make_world(voters=3, observers=1, seed=5)
    world.cluster.sent = []
    observer = max(world.cluster.nodes)
    assert not world.cluster.nodes[observer].is_voter
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    records = _records("for-all", 30)
    propose(world, records)
    wait_for(
        world,
        applied_everywhere(world, records, ids),
        3_000,
        "every node, the observer too, applying the records",
    )

    # Without the leader and one more voter there is no quorum: the observer cannot make one.
    voters = sorted(world.cluster.voter_ids)
    world.cluster.crash(leader.node_id)
    world.cluster.crash(_others(voters, leader.node_id)[0])
    world.after_event()
    world.run_for(10_000)
    assert world.leader() is None
    obs = world.cluster.nodes[observer].core
    assert obs is not None and obs.role in (Role.UNATTACHED, Role.FOLLOWER)

    for voter in voters:
        if not world.cluster.nodes[voter].up:
            world.cluster.restart(voter)
    world.after_event()
    more = _records("after-restart", 5)
    wait_for(world, lambda: try_propose(world, more), FAILOVER_BOUND_MS, "a leader again")
    wait_for(
        world,
        applied_everywhere(world, records + more, ids),
        5_000,
        "the observer applying the new leader's records",
    )

    votes = [m for m in world.cluster.sent if isinstance(m, (VoteRequest, VoteResponse))]
    assert votes, "the scenario should have held elections"
    assert all(observer not in (m.src, m.dst) for m in votes)
    assert all(
        leader_epoch_leader != observer for leader_epoch_leader in world.checker.leaders.values()
    )


def test_stale_leader_entries_are_truncated_never_committed() -> None:
    world = make_world(voters=3, seed=6)
    old = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    rest = _others(ids, old.node_id)
    world.network.partition([[old.node_id], rest])
    doomed = _records("doomed", 5)
    propose(world, doomed, old.node_id)  # accepted, but it can never reach a majority
    wait_for(
        world,
        lambda: (n := world.leader()) is not None and n.node_id in rest,
        FAILOVER_BOUND_MS,
        "a new leader on the majority side",
    )
    kept = _records("kept", 5)
    propose(world, kept)
    world.network.heal()
    wait_for(world, applied_everywhere(world, kept, ids), 5_000, "everyone applying `kept`")
    assert not any(r in world.checker.offset_of for r in doomed)
    logs = {i: [e.data for e in world.cluster.nodes[i].log.entries] for i in ids}
    assert all(not set(doomed) & set(log) for log in logs.values())


def test_follower_rejoins_a_live_leader_after_one_lost_fetch_response() -> None:
    """One FetchResponse to a follower is lost in a healthy cluster. The follower's fetch
    times out, but the leader is alive and a majority follows it: the follower must follow
    it again (the other voters deny its pre-votes, naming that leader) and catch up."""
    world = make_world(voters=3, seed=7)
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    follower = _others(ids, leader.node_id)[0]
    lost = _lose_next_fetch_response(world, follower)
    records = _records("after-loss", 5)
    propose(world, records)
    wait_for(world, lambda: bool(lost), 1_000, "a fetch response to lose")
    node = world.cluster.nodes[follower]
    # Its fetch times out (2 s), then pre-vote rounds: 10 s is several election rounds.
    wait_for(
        world,
        applied_everywhere(world, records, ids),
        10_000,
        f"follower {follower} rejoining leader {leader.node_id}",
    )
    assert node.core is not None and node.core.role is Role.FOLLOWER
    assert node.core.leader_id == leader.node_id


def test_a_leader_that_restarts_quickly_is_replaced() -> None:
    """The leader crashes and is back 100 ms later; it restarts Unattached (it never follows
    itself), so its followers, whose fetches it now refuses, must elect a leader."""
    world = make_world(voters=3, seed=8)
    old = stable_leader(world)
    world.cluster.crash(old.node_id)
    world.after_event()
    world.run_for(100)
    world.cluster.restart(old.node_id)
    world.after_event()
    records = _records("after-restart", 5)
    wait_for(world, lambda: try_propose(world, records), 10_000, "a leader to propose to")
    wait_for(
        world,
        applied_everywhere(world, records, sorted(world.cluster.nodes)),
        3_000,
        "every voter applying the records",
    )


def test_observer_follows_the_redirect_after_one_lost_fetch_response() -> None:
    """One FetchResponse to the observer is lost; its fetch times out and it asks a random
    voter where the leader is. The first answer names the leader: it must follow it then, not
    wait until a probe happens to reach the leader itself."""
    world = make_world(voters=5, observers=1, seed=OBSERVER_SEED)
    stable_leader(world)
    observer = max(world.cluster.nodes)
    lost = _lose_next_fetch_response(world, observer)
    records = _records("observed", 5)
    propose(world, records)
    wait_for(world, lambda: bool(lost), 1_000, "a fetch response to lose")
    # Fetch timeout, then one probe (a round trip) is all it should take.
    bound = CONFIG.fetch_timeout_ms + CONFIG.request_timeout_ms
    wait_for(
        world,
        applied_everywhere(world, records, [observer]),
        bound,
        "the observer following the leader again",
    )


OBSERVER_SEED = 1


def test_a_voter_left_in_a_later_epoch_rejoins() -> None:
    """A follower won a pre-vote for epoch e+1, persisted its candidacy, and lost power before
    its VoteRequests left (seed 8234 reaches the same state by losing both VoteRequests).
    The leader of e still has its majority. The cluster must end up in one epoch again, with
    that voter following and applying new records."""
    world = make_world(voters=3, seed=9)
    leader = stable_leader(world)
    assert leader.core is not None
    epoch = leader.core.epoch
    voter = _others(sorted(world.cluster.nodes), leader.node_id)[0]
    world.cluster.crash(voter)
    node = world.cluster.nodes[voter]
    node.durable = ElectionState(epoch=epoch + 1, voted_for=voter, leader_id=NO_LEADER)
    world.cluster.restart(voter)
    world.after_event()
    records = _records("rejoin", 5)
    wait_for(world, lambda: try_propose(world, records), FAILOVER_BOUND_MS, "a leader")
    wait_for(
        world,
        applied_everywhere(world, records, sorted(world.cluster.nodes)),
        10_000,
        f"voter {voter} rejoining from epoch {epoch + 1}",
    )


# --- snapshots (KIP-630) -------------------------------------------------------------------

# Snapshots here are a few hundred bytes (state_machine.py): 16-byte chunks make a download
# take a dozen round trips, a window a scenario can act in.
SMALL_CHUNKS = RaftConfig(fetch_snapshot_max_bytes=16)


def _compact_while_cut_off(world: World, node_id: int, count: int = 20) -> SnapshotId:
    """Cuts `node_id` off, has the others commit `count` records, and has the leader snapshot
    and compact its log past everything `node_id` holds. Heal to let it back."""
    ids = sorted(world.cluster.nodes)
    rest = _others(ids, node_id)
    world.network.partition([[node_id], rest])
    records = _records(f"while-{node_id}-is-cut-off", count)
    propose(world, records)
    leader = world.leader()
    assert leader is not None
    wait_for(world, applied_everywhere(world, records, rest), 2_000, "the others committing")
    taken = snapshot(world, leader.node_id)
    node = world.cluster.nodes[node_id]
    assert leader.log.start_offset == taken.end_offset > node.log.end_offset()
    return taken


def _downloading(node: SimNode) -> bool:
    """Partway through a snapshot download: some chunks in, more to come."""
    return (
        node.core is not None
        and node.core.snapshot_fetch is not None
        and (node.core.snapshot_fetch[1] > 0)
    )


def _chunks_to(world: World, node_id: int) -> list[FetchSnapshotResponse]:
    assert world.cluster.sent is not None
    return [
        m for m in world.cluster.sent if isinstance(m, FetchSnapshotResponse) and m.dst == node_id
    ]


def test_a_partitioned_follower_installs_the_leaders_snapshot_and_catches_up() -> None:
    world = make_world(voters=3, seed=10, raft=SMALL_CHUNKS)
    world.cluster.sent = []
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    follower = _others(ids, leader.node_id)[0]
    taken = _compact_while_cut_off(world, follower)
    world.network.heal()
    after = _records("after-heal", 5)
    propose(world, after)
    wait_for(
        world,
        applied_everywhere(world, after, ids),
        10_000,
        f"follower {follower} installing snapshot {taken} and catching up",
    )
    node = world.cluster.nodes[follower]
    assert node.core is not None and node.core.snapshots_fetched == 1
    assert node.log.start_offset == taken.end_offset and node.sm.start == taken.end_offset
    assert len([m for m in _chunks_to(world, follower) if m.data]) > 1, "one chunk only"


def test_a_restarted_node_loads_its_snapshot_before_applying_its_log() -> None:
    world = make_world(voters=3, seed=11)
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    first = _records("first", 10)
    propose(world, first)
    wait_for(world, applied_everywhere(world, first, ids), 2_000, "the first records")
    victim = _others(ids, leader.node_id)[0]
    taken = snapshot(world, victim)  # a follower's own snapshot and log-prefix cleanup
    second = _records("second", 5)
    propose(world, second)
    wait_for(world, applied_everywhere(world, second, ids), 2_000, "the second records")

    world.cluster.crash(victim)
    world.after_event()
    readies: list[tuple[Ready, Sequence[Entry]]] = []
    on_ready = world.checker.on_ready

    def spy(node: SimNode, ready: Ready, committed: Sequence[Entry]) -> None:
        if node.node_id == victim:
            readies.append((ready, committed))
        on_ready(node, ready, committed)

    world.checker.on_ready = spy  # type: ignore[method-assign]
    world.cluster.restart(victim)
    world.after_event()
    third = _records("third", 5)
    propose(world, third)
    wait_for(world, applied_everywhere(world, third, ids), 5_000, "the restarted node catching up")
    assert readies[0][0].load_snapshot == taken
    applied = [e.offset for _, committed in readies for e in committed]
    assert applied[0] == taken.end_offset, "applied from its log, not from the snapshot's end"
    node = world.cluster.nodes[victim]
    assert node.sm.start == taken.end_offset and node.log.start_offset == taken.end_offset
    assert node.core is not None and node.core.snapshots_fetched == 0


def test_an_observer_that_was_down_catches_up_from_a_snapshot() -> None:
    world = make_world(voters=3, observers=1, seed=12, raft=RaftConfig(fetch_snapshot_max_bytes=50))
    stable_leader(world)
    ids = sorted(world.cluster.nodes)
    observer = max(ids)
    world.cluster.crash(observer)
    world.after_event()
    taken = _compact_while_cut_off(world, observer)
    world.network.heal()
    world.cluster.restart(observer)
    world.after_event()
    after = _records("after-restart", 5)
    propose(world, after)
    wait_for(
        world,
        applied_everywhere(world, after, [observer]),
        5_000,
        f"observer {observer} installing snapshot {taken} and catching up",
    )
    node = world.cluster.nodes[observer]
    assert node.core is not None and node.core.snapshots_fetched == 1
    assert node.sm.start == taken.end_offset


def test_a_download_whose_snapshot_the_leader_deletes_starts_again_from_the_newer_one() -> None:
    world = make_world(voters=3, seed=13, raft=SMALL_CHUNKS)
    world.cluster.sent = []
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    follower = _others(ids, leader.node_id)[0]
    rest = _others(ids, follower)
    world.network.partition([[follower], rest])
    records = _records("cut-off", 20)
    propose(world, records)
    wait_for(world, applied_everywhere(world, records, rest), 2_000, "the others committing")
    # The first snapshot leaves some applied entries out, so a newer one can be taken later
    # without waiting for anything to commit.
    old = world.cluster.snapshot(leader.node_id, leader.applied - 5, compact=True)
    world.after_event()
    world.network.heal()
    node = world.cluster.nodes[follower]
    wait_for(world, lambda: _downloading(node), 10_000, f"follower {follower} downloading")
    assert node.core is not None and node.core.snapshot_fetch is not None
    assert node.core.snapshot_fetch[0] == old
    new = snapshot(world, leader.node_id)  # and compact: `old` is deleted
    assert leader.snapshots.size(old) is None
    wait_for(world, applied_everywhere(world, records, ids), 5_000, "the follower catching up")
    assert any(m.error == SNAPSHOT_NOT_FOUND for m in _chunks_to(world, follower))
    assert node.core.snapshots_fetched == 1 and node.log.start_offset == new.end_offset


@pytest.mark.parametrize("when", ["mid-download", "after-install"])
def test_a_follower_that_crashes_while_installing_a_snapshot_recovers(when: str) -> None:
    """Partway through a download the partial snapshot dies with the node, which downloads
    it again; right after the install (before its state machine loaded it) the snapshot is
    durable and the log restarts at it, so the restarted node loads it and fetches on."""
    world = make_world(voters=3, seed=14, raft=SMALL_CHUNKS)
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    follower = _others(ids, leader.node_id)[0]
    taken = _compact_while_cut_off(world, follower)
    node = world.cluster.nodes[follower]
    if when == "after-install":
        world.cluster.arm_crash(follower, CrashPoint.BEFORE_SNAPSHOT_LOAD, torn=False)
    world.network.heal()
    if when == "mid-download":
        wait_for(world, lambda: _downloading(node), 10_000, f"follower {follower} downloading")
        world.cluster.crash(follower)
        world.after_event()
        assert node.snapshots.partial is None and node.snapshots.latest() is None
    else:
        wait_for(world, lambda: not node.up, 10_000, f"follower {follower} crashing on install")
        assert node.snapshots.latest() == taken and node.log.start_offset == taken.end_offset
    world.run_for(500)
    world.cluster.restart(follower)
    world.after_event()
    after = _records("after-restart", 5)
    propose(world, after)
    wait_for(world, applied_everywhere(world, after, ids), 10_000, "the follower catching up")
    assert node.core is not None and node.sm.start == taken.end_offset
    # Downloaded again after a mid-download crash; loaded from its own store otherwise.
    assert node.core.snapshots_fetched == (1 if when == "mid-download" else 0)


def test_a_late_fetch_response_does_not_overtake_a_snapshot_download() -> None:
    """Seed 4665 made deterministic (known_bugs.py: late-fetch-response-during-snapshot-
    download, fixed). A follower's Fetch reaches the leader twice. The first copy is answered
    with the entries the follower lacks, late; the leader then snapshots below its high
    watermark and compacts, so the second copy is answered with the snapshot, which the
    follower starts downloading. The late answer matches the follower's log all the same:
    the follower must not take it (its high watermark would pass the snapshot's end, and the
    install then fails), and must catch up."""
    world = make_world(voters=3, seed=15, raft=SMALL_CHUNKS)
    world.cluster.sent = []
    leader = stable_leader(world)
    ids = sorted(world.cluster.nodes)
    follower = _others(ids, leader.node_id)[0]
    node = world.cluster.nodes[follower]
    # The leader's answers stop reaching the follower, whose fetches still reach the leader.
    world.network.cut_one_way(leader.node_id, follower)
    records = _records("unheard", 10)
    propose(world, records)
    wait_for(world, applied_everywhere(world, records, _others(ids, follower)), 2_000, "commit")
    fetch = [m for m in world.cluster.sent if isinstance(m, FetchRequest) and m.src == follower][-1]
    assert fetch.fetch_offset == node.log.end_offset()
    world.cluster.deliver_copy(fetch)  # the first copy: its answer is held back (cut)
    world.run_for(20)
    late = [m for m in world.cluster.sent if isinstance(m, FetchResponse) and m.dst == follower][-1]
    assert late.entries and late.fetch_offset == fetch.fetch_offset
    taken = world.cluster.snapshot(leader.node_id, late.high_watermark - 3, compact=True)
    world.after_event()
    assert fetch.fetch_offset < taken.end_offset < late.high_watermark
    world.network.heal()
    world.cluster.deliver_copy(fetch)  # the second copy: answered with the snapshot
    wait_for(world, lambda: _downloading(node), 1_000, f"follower {follower} downloading")
    world.cluster.deliver_copy(late)
    caught_up = applied_everywhere(world, records, ids)
    # Caught up, and done with the download.
    wait_for(
        world,
        lambda: caught_up() and node.core is not None and node.core.snapshot_fetch is None,
        5_000,
        "the follower catching up",
    )
    assert node.core is not None and node.core.snapshots_fetched == 1
    assert node.log.start_offset == taken.end_offset


def vote_lost_in_a_power_cut(seed: int = 1) -> World:
    """A voter loses power while it writes the vote it just granted. Raft's rule: the vote
    leaves only once quorum-state holds it, so the candidate never hears of it, and the
    voter, back with the state on its disk, may vote in that epoch again. The leader is
    down, the voter (the follower whose fetch deadline comes last, so the other one stands
    first) is armed; once it is down, the candidate is cut off from the two others, which
    restart and elect a leader of their own. The invariants then hold: if the vote had left
    before the disk had it, the candidate would lead the epoch the others also elect a
    leader for (invariant (a))."""
    world = make_world(voters=3, seed=seed)
    leader = stable_leader(world)
    followers = [n for n in world.cluster.up_nodes() if n is not leader]
    voter = max(followers, key=lambda n: n.core.fetch_deadline if n.core else 0)
    candidate = next(n for n in followers if n is not voter)
    world.cluster.arm_crash(voter.node_id, CrashPoint.BEFORE_VOTE_DURABLE, torn=False)
    world.cluster.crash(leader.node_id)
    world.after_event()
    wait_for(world, lambda: not voter.up, 10_000, "the voter losing power as it votes")
    world.run_for(50)  # what was sent before the power cut arrives (delays are <= 5 ms)
    world.network.partition([[candidate.node_id], [leader.node_id, voter.node_id]])
    world.cluster.restart(leader.node_id)
    world.cluster.restart(voter.node_id)
    world.after_event()
    wait_for(
        world,
        lambda: any(n.core.role is Role.LEADER for n in (leader, voter) if n.core is not None),
        10_000,
        "a leader among the two the candidate is cut off from",
    )
    world.network.heal()
    world.after_event()
    stable_leader(world)
    return world


def test_a_vote_lost_in_a_power_cut_never_reached_the_candidate() -> None:
    world = vote_lost_in_a_power_cut()
    assert world.cluster.coverage["vote lost in a power cut"] == 1
