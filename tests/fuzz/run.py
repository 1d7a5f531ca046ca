"""One fuzz run: a cluster, `cases` cases of one seed, the checks between them, and the
findings.

Every CHECK_EVERY cases (sooner after a call that ran into its deadline) each node must be
alive and answer health within 1 s, and the controllers must agree on an active controller.
A node that fails twice in a row is a finding ("slow health" when the second look passes):
the run replays that stretch case by case on a fresh cluster to name the first case after
which it shows (`isolate`), then restarts the sick nodes, or starts a fresh cluster when the
quorum is gone (a forged Raft epoch stays on disk), and goes on.
Around a case that may change a topic the run snapshots the topics (checks.Snapshot); a
refused request that changed them is a finding. A Produce answered NONE is read back at
the offset it was given; a batch a consumer cannot decode is a finding. At the end: every
stored batch of the fuzzed topics, log growth, distinct tracebacks, and a produce/consume
round trip with the client library.

On a secured cluster (`secured=True`, tests/fuzz/secured.py) each case also names its
caller (cases.py): a call without a valid session of its own (anonymous, a replayed or a
forged token) must be refused UNAUTHENTICATED with SASL_AUTHENTICATION_FAILED, before it
could change anything, unless it is health or the handshake; and no SaslAuthenticate
exchange of the fuzzer, which knows no password, may yield a session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from strom_api.v1 import security_pb2
from tests.fuzz import checks
from tests.fuzz.cases import USER, Case, build
from tests.fuzz.cluster import TOPICS, FuzzCluster
from tests.fuzz.services import (
    BROKER,
    CONTROLLER,
    MAY_CREATE_OFFSETS_TOPIC,
    NEVER_HEARD,
    SERVED_UNAUTHENTICATED,
    Outcome,
    catalogue,
    select,
)
from tests.fuzz.services import call as call_rpc

CHECK_EVERY = 20
CALL_DEADLINE_S = 2.0
WATCH_DEADLINE_S = 0.3  # Health.Watch never ends by itself
LOG_LIMIT_BYTES = 1 << 20  # per node, for up to LOG_LIMIT_CASES cases
LOG_LIMIT_CASES = 5000

# What a finding is about; test_fuzz.py asserts on each kind separately.
CRASH, HANG, QUORUM, SLOW, STATE, LOG_GROWTH, TRACEBACK, POISON, ROUND_TRIP = (
    "node exited",
    "health",
    "quorum lost",
    "slow health",
    "state changed",
    "log growth",
    "traceback",
    "poison batch",
    "round trip",
)
# Secured clusters only: a call without a valid session served (or refused otherwise than
# UNAUTHENTICATED), and a session handed out for credentials the fuzzer does not have.
UNAUTHENTICATED_SERVED, SESSION_GRANTED = "served without a session", "session granted"


@dataclass
class Finding:
    kind: str
    where: str  # an RPC or a node
    case: str  # the case (or stretch of cases) that shows it
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where} — {self.case}: {self.detail}"


@dataclass
class FuzzResult:
    seed: int
    cases: int = 0
    seconds: float = 0.0
    clusters: int = 0
    recoveries: int = 0  # times a node or the cluster was restarted after a finding
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)  # "rpc status/verdict" -> count
    log_growth: Counter[int] = field(default_factory=Counter)  # node -> bytes
    traceback_counts: Counter[str] = field(default_factory=Counter)
    traceback_rpcs: dict[str, set[str]] = field(default_factory=dict)  # key -> RPCs named
    spent: Counter[str] = field(default_factory=Counter)  # seconds per activity

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


class Runner:
    def __init__(
        self,
        base: str,
        seed: int,
        service: str | None,
        echo: bool,
        verbose: bool = False,
        secured: bool = False,
    ) -> None:
        self.verbose = verbose
        self.base = base
        self.seed = seed
        self.secured = secured
        self.rpcs = select(catalogue(secured), service)
        self.echo = echo
        self.result = FuzzResult(seed)
        self.fc: FuzzCluster | None = None
        self.took: dict[int, float] = {}  # case number -> seconds its call took

    # --- the cluster -----------------------------------------------------------------

    def _say(self, line: str) -> None:
        if self.echo:
            print(line, flush=True)

    @contextlib.contextmanager
    def _timed(self, activity: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.result.spent[activity] += time.monotonic() - started

    def fresh_cluster(self) -> FuzzCluster:
        if self.fc is not None:
            self._retire(self.fc)
        self.result.clusters += 1
        self.fc = FuzzCluster(
            os.path.join(self.base, f"cluster{self.result.clusters}"), self.secured
        )
        with self._timed("starting clusters"):
            self.fc.start()
        self._say(f"cluster {self.result.clusters} up")
        return self.fc

    def _retire(self, fc: FuzzCluster) -> None:
        """Counts a cluster's log growth and tracebacks, then stops it."""
        for node in fc.cluster.ids:
            text = fc.log_since_start(node)
            self.result.log_growth[node] += len(text.encode())
            self.result.traceback_counts.update(checks.tracebacks(text, self.result.traceback_rpcs))
        fc.stop()
        self.fc = None

    # --- cases -----------------------------------------------------------------------

    def play(self, case: Case) -> Outcome:
        assert self.fc is not None
        channel = self.fc.case_channel(case.node, case.rpc.listener, case.identity)
        deadline = WATCH_DEADLINE_S if case.rpc.method == "Watch" else CALL_DEADLINE_S
        with self._timed("calls"):
            return call_rpc(channel, case.rpc, case.requests, deadline, case.metadata)

    def play_checked(self, case: Case, before: dict | None) -> dict | None:
        """Plays a case; for one that may change a topic, compares snapshots around it.
        Returns the snapshot now valid (None: unknown, take one before the next case)."""
        assert self.fc is not None
        outcome = self.play(case)
        self.took[case.number] = outcome.seconds
        verdict = checks.verdict(case.rpc, outcome, len(case.requests))
        if case.rpc.service in NEVER_HEARD:
            verdict = "refused"  # a non-member's message must change nothing, answered or not
        status = outcome.code.name if outcome.code.name != "OK" else verdict
        if self.verbose:
            self._say(f"{case.label}: {status} in {outcome.seconds:.2f} s {outcome.details!r}")
            for data in outcome.responses[:4]:
                self._say(describe(case.rpc.response_class(), data))
        who = f" {case.identity}" if case.identity else ""
        self.result.answers[f"{case.rpc.name}{who} {status}"] += 1
        if case.identity:
            self._check_authentication(case, outcome)
        if case.rpc.method == "Produce" and outcome.code.name == "OK" and outcome.responses:
            assert self.fc is not None
            with self._timed("reading back produced batches"):
                try:
                    poisoned = checks.appended_batches_problems(
                        self.fc.channels[(case.node, case.rpc.listener)],
                        case.requests[0],
                        outcome.responses[0],
                    )
                except Exception:
                    poisoned = []  # the request did not parse: nothing was appended
            for problem in poisoned:
                self._finding(POISON, case.rpc.name, case.label, problem)
        if case.rpc.method in MAY_CREATE_OFFSETS_TOPIC:
            return None  # a group request (re)creates __consumer_offsets when it is missing
        if case.rpc.read_only:
            return before
        if verdict != "refused" or before is None:
            return None
        with self._timed("snapshots"):
            after = self._snapshotter().take()
        if after is None:
            return None
        diffs = checks.differences(before, after)
        if diffs:
            self._finding(
                checks_kind=STATE,
                where=case.rpc.name,
                case=case.label,
                detail=f"answered {status} ({outcome.details[:120]!r}) yet " + "; ".join(diffs[:5]),
            )
        return after

    def _check_authentication(self, case: Case, outcome: Outcome) -> None:
        """A secured cluster's rules (see the module's docstring)."""
        if case.rpc.service == "SecurityService":
            for data in outcome.responses:
                granted = security_pb2.SaslAuthenticateResponse.FromString(data).session_token
                if granted:
                    self._finding(
                        SESSION_GRANTED,
                        case.rpc.name,
                        case.label,
                        f"a session ({len(granted)}-byte token) for an exchange without a "
                        "known password",
                    )
            return
        if case.identity == USER or case.rpc.service in SERVED_UNAUTHENTICATED:
            return
        refused = outcome.code == grpc.StatusCode.UNAUTHENTICATED and outcome.details.startswith(
            "SASL_AUTHENTICATION_FAILED"
        )
        if not refused:
            self._finding(
                UNAUTHENTICATED_SERVED,
                case.rpc.name,
                case.label,
                f"answered {outcome.code.name} {outcome.details[:160]!r} with "
                f"{len(outcome.responses)} response(s)",
            )

    def _finding(self, checks_kind: str, where: str, case: str, detail: str) -> None:
        finding = Finding(checks_kind, where, case, detail)
        self.result.findings.append(finding)
        self._say(f"FINDING {finding}")

    def _snapshotter(self) -> checks.Snapshot:
        assert self.fc is not None
        return checks.Snapshot(
            self.fc.listener_channels(BROKER), self.fc.listener_channels(CONTROLLER)
        )

    def _snapshot(self) -> dict | None:
        assert self.fc is not None
        with self._timed("snapshots"):
            return self._snapshotter().settled()

    # --- the run ---------------------------------------------------------------------

    def run(
        self,
        first: int,
        cases: int,
        isolate: bool,
        max_recoveries: int,
        budget_s: float | None,
    ) -> FuzzResult:
        try:
            return self._run(first, cases, isolate, max_recoveries, budget_s)
        finally:
            if self.fc is not None:  # an error ended the run: its nodes must not outlive it
                self.fc.stop()
                self.fc = None

    def _run(
        self,
        first: int,
        cases: int,
        isolate: bool,
        max_recoveries: int,
        budget_s: float | None,
    ) -> FuzzResult:
        started = time.monotonic()
        self.fresh_cluster()
        # The budget is of cases: a cluster that took long to start (a slow machine) leaves
        # the run as many seconds of calls as a fast one.
        cases_started = time.monotonic()
        stretch: list[Case] = []
        snapshot: dict | None = None
        for number in range(first, first + cases):
            assert self.fc is not None
            with self._timed("building cases"):
                case = build(self.seed, number, self.rpcs, self.fc.ctx)
            if snapshot is None and not case.rpc.read_only:
                snapshot = self._snapshot()
            snapshot = self.play_checked(case, snapshot)
            self.result.cases += 1
            stretch.append(case)
            # A call that ran into its deadline ends the stretch early: if its node hangs,
            # the next cases would each wait out their deadline on it too.
            timed_out = self.took.get(number, 0) >= CALL_DEADLINE_S
            if len(stretch) >= CHECK_EVERY or timed_out or number == first + cases - 1:
                problems = self._problems()
                if problems:
                    # A second look tells a node that stays unresponsive (a spin, a dead
                    # event loop) from one that was slow for a moment on a loaded machine.
                    again = self._problems()
                    if not again:
                        slowest = max(stretch, key=lambda c: self.took.get(c.number, 0))
                        self._finding(
                            SLOW,
                            slowest.rpc.name,
                            f"cases {stretch[0].number}..{stretch[-1].number} of seed {self.seed}",
                            "; ".join(problems) + f"; then healthy again (slowest "
                            f"call: case {slowest.number}, "
                            f"{self.took.get(slowest.number, 0):.2f} s)",
                        )
                    problems = again
                if problems:
                    still = self._unhealthy(stretch, problems, isolate)
                    self.result.recoveries += 1
                    if self.result.recoveries > max_recoveries:
                        self.result.notes.append(
                            f"stopped after case {number}: {max_recoveries} recoveries used"
                        )
                        break
                    if still:
                        self._recover(still)
                    snapshot = None
                if budget_s is not None and time.monotonic() - cases_started > budget_s:
                    self.result.notes.append(
                        f"stopped after case {number}: the {budget_s:.0f} s budget was spent"
                    )
                    break
                stretch = []
        self._finish()
        self.result.seconds = time.monotonic() - started
        return self.result

    def _unhealthy(self, stretch: list[Case], problems: list[str], isolate: bool) -> list[str]:
        """Records the finding; returns the problems of the cluster now in use (isolation
        replays on a fresh one)."""
        assert self.fc is not None
        sick = _nodes_in(problems) or self.fc.cluster.ids
        last_words = self._last_traceback(sick)
        culprit = self._isolate(stretch) if isolate else None
        still = [] if isolate else problems
        if culprit is not None:
            case, problems = culprit
            still = problems
            # The first case after which the cluster is unwell; an earlier one of the stretch
            # may have prepared it (a forged Raft epoch shows at the next election).
            where = case.rpc.name
            label = f"{case.label}; replayed {stretch[0].number}..{case.number} on a fresh cluster"
        else:
            # Not shown by any one case alone (or not isolated): name the stretch, and the
            # call that took longest in it, the likeliest cause of a hang.
            slowest = max(stretch, key=lambda c: self.took.get(c.number, 0))
            where = slowest.rpc.name
            label = (
                f"cases {stretch[0].number}..{stretch[-1].number} of seed {self.seed}"
                f"{' (no case alone)' if isolate else ''}; slowest call: case "
                f"{slowest.number} ({slowest.kind}, {self.took.get(slowest.number, 0):.2f} s)"
            )
        self._finding(
            _kind(problems),
            where,
            label,
            "; ".join(problems) + (f"; last traceback: {last_words}" if last_words else ""),
        )
        return still

    def _recover(self, problems: list[str]) -> None:
        """Restarts the nodes that are down or unresponsive; a fresh cluster when that does
        not bring every node back (a quorum broken for good stays broken)."""
        assert self.fc is not None
        c = self.fc.cluster
        with self._timed("restarting nodes"):
            sick = _nodes_in(problems)
            if any(p.startswith("quorum") for p in problems):
                sick = []  # a quorum broken on disk stays broken across restarts
            for node in sick:
                if node in c.procs:
                    c.stop(node, signal.SIGKILL)
                c.start(node)
            try:
                c.wait_for_brokers(timeout_s=20)
                healthy = bool(sick) and not self._problems()
            except (AssertionError, TimeoutError):
                healthy = False
        if healthy:
            self._say(f"nodes {sick} restarted")
        else:
            self.fresh_cluster()

    def _problems(self) -> list[str]:
        """Nodes down or not answering health in time, and a quorum without a leader."""
        assert self.fc is not None
        with self._timed("health"):
            problems = checks.health_problems(self.fc.cluster, self.fc.health_channel)
            if not problems:
                quorum = checks.quorum_problem(self.fc.listener_channels(CONTROLLER))
                problems += [quorum] if quorum else []
        return problems

    def _last_traceback(self, nodes: list[int]) -> str:
        assert self.fc is not None
        found = []
        for node in nodes:
            tb = checks.tracebacks(self.fc.log_since_start(node)[-20000:])
            found += [f"node {node} {k}" for k in tb]
        return found[-1] if found else ""

    def _isolate(self, stretch: list[Case]) -> tuple[Case, list[str]] | None:
        """Replays a stretch on a fresh cluster with a health check after every case; the
        first case after which a node fails is the one to blame."""
        fc = self.fresh_cluster()
        for original in stretch:
            case = build(self.seed, original.number, self.rpcs, fc.ctx)
            self.play(case)
            problems = self._problems()
            if problems:
                return case, problems
        return None

    def _finish(self) -> None:
        fc = self.fc
        assert fc is not None
        problems = self._problems()
        if problems:
            self._finding(
                _kind(problems),
                "end of run",
                f"seed {self.seed}",
                "; ".join(problems),
            )
            fc = self.fresh_cluster()  # the other end checks still mean something
        for bad in checks.unreadable_batches(fc.cluster, list(TOPICS), fc.admin):
            self._finding(POISON, "Produce", f"seed {self.seed}", bad)
        try:
            round_trip(fc)
        except Exception as e:
            self._finding(
                ROUND_TRIP,
                "strom.Producer/Consumer",
                f"seed {self.seed}",
                f"{type(e).__name__}: {e}"[:500],
            )
        self._retire(fc)
        limit = LOG_LIMIT_BYTES * max(1, -(-self.result.cases // LOG_LIMIT_CASES))
        for node, grown in sorted(self.result.log_growth.items()):
            if grown > limit:
                self._finding(
                    LOG_GROWTH,
                    f"node {node}",
                    f"seed {self.seed}",
                    f"log grew {grown:,} bytes in {self.result.cases} cases (limit {limit:,})",
                )
        for key, count in self.result.traceback_counts.most_common():
            rpcs = sorted(self.result.traceback_rpcs.get(key, ()))
            named = (
                f" (from {len(rpcs)} RPCs: {', '.join(rpcs[:6])}{' ...' if len(rpcs) > 6 else ''})"
            )
            self._finding(
                TRACEBACK,
                key.split(": ", 1)[0],
                f"seed {self.seed}",
                f"{count}x {key}{named if rpcs else ''}",
            )


def _kind(problems: list[str]) -> str:
    if any("exited" in p for p in problems):
        return CRASH
    return HANG if _nodes_in(problems) else QUORUM


def _nodes_in(problems: list[str]) -> list[int]:
    return sorted({int(p.split()[1]) for p in problems if p.startswith("node ")})


def round_trip(fc: FuzzCluster, records: int = 20) -> None:
    """A normal produce and consume with the project's client, on a new topic."""
    from strom.consumer import Consumer
    from strom.producer import Producer
    from tests.client.cluster_helpers import bootstrap, create_topic

    topic = f"fuzz-round-trip-{int(time.time() * 1000)}"
    create_topic(fc.cluster, topic, 2)
    values = [b"round-trip-%d" % i for i in range(records)]
    settings: Any = fc.client_settings()
    with Producer(bootstrap(fc.cluster), acks="all", **settings) as producer:
        futures = [producer.send(topic, v) for v in values]
        producer.flush()
        for f in futures:
            f.get(timeout=15)
    with Consumer(
        topic,
        bootstrap_servers=bootstrap(fc.cluster),
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        **settings,
    ) as consumer:
        got = sorted(r.value for r in consumer)
    if got != sorted(values):
        raise AssertionError(f"read back {len(got)} of {records} records")


def run(
    base: str,
    seed: int,
    cases: int,
    service: str | None = None,
    first: int = 0,
    isolate: bool = True,
    max_recoveries: int = 20,
    budget_s: float | None = None,
    echo: bool = True,
    verbose: bool = False,
    secured: bool = False,
) -> FuzzResult:
    """`budget_s`: stop starting cases once they took this long, the cluster's start not
    counted (the end checks still run);
    `secured`: against tests/fuzz/secured.py's SASL_SSL cluster."""
    return Runner(base, seed, service, echo, verbose, secured).run(
        first, cases, isolate, max_recoveries, budget_s
    )


def describe(cls: Any, data: bytes, limit: int = 1500) -> str:
    """A response message as text, cut at `limit` characters."""
    try:
        text = str(cls.FromString(data))
    except Exception as e:
        text = f"<{len(data)} bytes that do not parse: {e}>"
    return text if len(text) <= limit else text[:limit] + " ..."


def format_result(result: FuzzResult) -> str:
    lines = [
        f"seed {result.seed}: {result.cases} cases in {result.seconds:.1f} s, "
        f"{result.clusters} cluster(s), {len(result.findings)} finding(s)",
        "  time: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.spent.most_common()),
    ]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  {f}" for f in result.findings]
    lines.append(
        "  log growth per node: "
        + ", ".join(f"node {n} {b:,} B" for n, b in sorted(result.log_growth.items()))
    )
    return "\n".join(lines)
