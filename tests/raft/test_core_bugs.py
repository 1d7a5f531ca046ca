"""Stories about the Raft core's liveness, told with the interaction harness.

Each test guards a liveness bug that was found and fixed in raft/core.py; a new one is added
as `xfail(strict=True)` until the core is fixed, then the mark goes. Assertions check meaning
(a role, a granted vote), not the exact printout, so a fix that words its messages
differently still turns them green; a failure shows the whole transcript.
"""

from __future__ import annotations

from interaction import Cluster

from raft.messages import VoteResponse
from raft.roles import Role


class Story:
    """Runs script lines and keeps the transcript for failure messages."""

    def __init__(self) -> None:
        self.cluster = Cluster()
        self.transcript: list[str] = []

    def run(self, script: str) -> None:
        for raw in script.strip().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                self.transcript.append(f"{line}\n----\n{self.cluster.run(line)}\n")

    def role(self, node: int) -> Role:
        return self.cluster.nodes[node].core.role

    def check(self, ok: bool, what: str) -> None:
        assert ok, "\n".join(self.transcript) + f"\nexpected: {what}"


ELECT_1 = """
    add-nodes voters=1,2,3
    tick 1 100
    stabilize quiet
"""


def test_followers_elect_a_new_leader_when_theirs_is_gone() -> None:
    """Fixed in 665e977. Leader 1 is cut off; followers 2 and 3 time out 50 ms apart. Each
    one's pre-vote reached the other while that one still followed leader 1 and named it in
    its rejection; going back to follow the dead leader reset the fetch timer, and the two
    kept rejecting each other forever (a livelock: no election at all)."""
    story = Story()
    story.run(ELECT_1 + "tick 3 50\nstabilize quiet\npartition 1 | 2,3")
    for _ in range(16):  # 800 ms, four fetch timeouts
        story.run("tick 2 50\ntick 3 50\nstabilize quiet")
    leaders = [n for n in (2, 3) if story.role(n) is Role.LEADER]
    story.check(len(leaders) == 1, "nodes 2 and 3 elect a leader among themselves")


def test_rejoining_voter_follows_the_healthy_leader() -> None:
    """prevote.txt, continued: node 3 was partitioned from a healthy leader 1, became
    Prospective, and after the partition heals its pre-votes are rejected by 1 and 2, both
    naming leader 1 in epoch 1. KIP-996: it should follow leader 1 again (Kafka: after a
    majority of rejections, a Prospective that knows the leader becomes its Follower). The
    core ignores the name because 1 is the leader it gave up on, stays Prospective, and never
    fetches again while leader 1 lives."""
    story = Story()
    story.run(ELECT_1 + "partition 3 | 1,2\ntick 3 200\nstabilize quiet\nheal")
    for _ in range(10):  # 500 ms
        story.run("tick all 50\nstabilize quiet")
    story.check(story.role(3) is Role.FOLLOWER, "node 3 follows leader 1 again")
    story.check(story.cluster.nodes[3].core.leader_id == 1, "node 3 follows leader 1 again")


def test_follower_that_never_fetched_grants_a_pre_vote() -> None:
    """Leader 1 is cut off. Node 2 restarts: its persisted election state names leader 1, so
    it comes back as Follower of 1 without having fetched from it. Node 3's fetch timeout
    fires and it asks for pre-votes. KIP-996 (Kafka FollowerState.hasFetchedFromLeader): a
    follower grants a pre-vote until it has fetched successfully from its leader, since until
    then nothing says that leader is alive. The core counts the restart as a fetch and
    rejects for a whole fetch timeout."""
    story = Story()
    story.run(
        ELECT_1
        + """
        partition 1 | 2,3
        crash 2
        tick 3 200
        process-ready 3
        deliver-msgs from=3 to=2
        process-ready 2
        """
    )
    answers = [m for m in story.cluster.queue if isinstance(m, VoteResponse) and m.src == 2]
    story.check(len(answers) == 1 and answers[0].granted, "node 2 grants node 3's pre-vote")


def test_stale_pre_vote_grant_does_not_count() -> None:
    """Node 2 grants node 3's pre-vote in epoch 0; the answer is delayed. Node 2 then wins
    epoch 1 and leads a healthy quorum. Node 3 misses some fetches, becomes Prospective in
    epoch 1, and only then gets node 2's old grant (VoteResponse epoch=0, granted). The core
    counts it for the epoch-2 pre-vote round, becomes Candidate in epoch 2 and, with its
    VoteRequest, deposes leader 2 although leader 2 and node 1 would both reject the pre-vote:
    exactly what pre-vote exists to prevent. Kafka ignores any response whose epoch is below
    the current one."""
    story = Story()
    story.run(
        """
        add-nodes voters=1,2,3
        tick 3 100
        process-ready 3
        deliver-msgs from=3 to=2
        process-ready 2
        # node 2's grant for node 3 (epoch 0) stays in the queue
        deliver-msgs from=3 to=1 drop=true
        tick 2 100
        process-ready 2
        deliver-msgs from=2 to=1
        deliver-msgs from=2 to=3 type=VoteRequest
        process-ready all
        deliver-msgs from=1 to=2
        deliver-msgs from=3 to=2
        process-ready 2
        deliver-msgs type=VoteRequest
        process-ready all
        deliver-msgs type=VoteResponse to=2
        process-ready 2
        deliver-msgs type=BeginQuorumEpoch
        process-ready all
        deliver-msgs to=2
        process-ready 2
        deliver-msgs to=1
        deliver-msgs to=3 type=FetchResponse
        process-ready 1
        process-ready 3
        deliver-msgs to=2
        process-ready 2
        status
        # node 3's next fetch is lost, and it times out
        deliver-msgs from=3 type=Fetch drop=true
        tick 3 200
        process-ready 3
        # now the old grant arrives
        deliver-msgs from=2 to=3 type=VoteResponse
        """
    )
    story.check(story.cluster.nodes[2].core.role is Role.LEADER, "setup: node 2 leads epoch 1")
    story.check(story.role(3) is Role.PROSPECTIVE, "node 3 ignores the stale grant")


def test_late_fetch_answer_does_not_reattach_to_a_resigned_leader() -> None:
    """Leader 1 answers node 2's fetch, then resigns; its EndQuorumEpoch reaches node 2 before
    that answer. Node 2 must treat leader 1 as gone for epoch 1 (it can never lead epoch 1
    again) and keep its short election backoff. The core makes node 2 a Follower of 1 on
    the late answer, which also makes it reject the successor's pre-vote for a fetch
    timeout."""
    story = Story()
    story.run(
        ELECT_1
        + """
        propose 1 a
        process-ready 1
        resign 1
        process-ready 1
        deliver-msgs type=EndQuorumEpoch
        deliver-msgs type=FetchResponse to=2
        """
    )
    story.check(story.role(2) is Role.UNATTACHED, "node 2 stays Unattached after EndQuorumEpoch")
