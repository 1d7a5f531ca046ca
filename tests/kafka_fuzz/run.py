"""One fuzz run: a cluster, `cases` cases of one seed, the checks after each, and the
findings.

After every case each node must still run and answer a Metadata round trip within a second
(a second look tells a node that was slow for a moment from one that hangs); the case's
answers, the nodes' new log lines and the stall watch's longest ping are checked
(checks.py). A node that exited or hangs is a finding of that case; the run kills and
restarts it (a fresh cluster when it does not come back) and goes on, up to
`max_recoveries` times. A finding that recurs (the same kind, APIs and text, numbers
aside) is counted under the first case that showed it, which is the one to replay."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from server.kafka.apis import SERVED
from tests.kafka_fuzz import checks
from tests.kafka_fuzz.cases import Case, build
from tests.kafka_fuzz.cluster import FuzzCluster
from tests.kafka_fuzz.connection import Exchange, Prober, exchange

_NUMBERS = re.compile(r"\d+")


@dataclass
class Finding:
    kind: str
    case: str
    detail: str
    count: int = 1  # cases that showed it

    def __str__(self) -> str:
        again = f" (and {self.count - 1} more case(s))" if self.count > 1 else ""
        return f"[{self.kind}] {self.case}{again}: {self.detail}"


@dataclass
class FuzzResult:
    seed: int
    cases: int = 0
    seconds: float = 0.0
    clusters: int = 0
    recoveries: int = 0  # times a node was restarted after a finding
    longest_ping: float = 0.0
    notes: list[str] = field(default_factory=list)
    findings: dict[tuple[str, str], Finding] = field(default_factory=dict)  # by _finding's key
    answers: Counter[str] = field(default_factory=Counter)  # "kind end" -> cases

    def of_kind(self, *kinds: str) -> list[Finding]:
        return [f for f in self.findings.values() if f.kind in kinds]


class Runner:
    def __init__(
        self, base: str, seed: int, apis: list[int] | None, echo: bool, verbose: bool
    ) -> None:
        self.base = base
        self.seed = seed
        self.apis = apis
        self.echo = echo
        self.verbose = verbose
        self.result = FuzzResult(seed)
        self.fc: FuzzCluster | None = None
        self.health: dict[int, Prober] = {}  # a connection per node for the checks' pings
        self.watch: checks.StallWatch | None = None

    @property
    def cluster(self) -> FuzzCluster:
        assert self.fc is not None
        return self.fc

    def _say(self, line: str) -> None:
        if self.echo:
            print(line, flush=True)

    # --- the cluster -----------------------------------------------------------------

    def _fresh_cluster(self) -> None:
        self._retire()
        self.result.clusters += 1
        self.fc = FuzzCluster(os.path.join(self.base, f"cluster{self.result.clusters}"))
        self.fc.start()
        addresses = {n: self.fc.address(n) for n in self.fc.nodes.ids}
        self.health = {n: Prober(*a) for n, a in addresses.items()}
        self.watch = checks.StallWatch(addresses)
        self._say(f"cluster {self.result.clusters} up")

    def _retire(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        for prober in self.health.values():
            prober.close()
        if self.fc is not None:
            self.fc.stop()
            self.fc = None

    def _recover(self, sick: list[int]) -> None:
        """Restarts the nodes that exited or hang; a fresh cluster when one does not come
        back (a quorum or a log that a case broke for good)."""
        try:
            for node in sick:
                self.cluster.restart(node)
                self.health[node].close()
        except TimeoutError as exc:
            self.result.notes.append(f"nodes {sick} did not come back ({exc}): a fresh cluster")
            self._fresh_cluster()
        else:
            self._say(f"nodes {sick} restarted")

    # --- the run ---------------------------------------------------------------------

    def run(
        self, first: int, cases: int, max_recoveries: int, budget_s: float | None
    ) -> FuzzResult:
        started = time.monotonic()
        try:
            self._run(first, cases, max_recoveries, budget_s)
        finally:  # an error ends the run too: its nodes must not outlive it
            self._retire()
            self.result.seconds = time.monotonic() - started
        return self.result

    def _run(self, first: int, cases: int, max_recoveries: int, budget_s: float | None) -> None:
        self._fresh_cluster()
        started = time.monotonic()
        for number in range(first, first + cases):
            if budget_s is not None and time.monotonic() - started > budget_s:
                self.result.notes.append(f"stopped after {budget_s:.0f} s, at case {number}")
                break
            assert self.cluster.ctx is not None
            case = build(self.seed, number, self.cluster.ctx, self.apis)
            self.play(case)
            self.result.cases += 1
            sick = self._check_nodes(case)
            if sick:
                self.result.recoveries += 1
                if self.result.recoveries > max_recoveries:
                    self.result.notes.append(f"stopped after case {number}: recoveries used up")
                    break
                self._recover(sick)

    def play(self, case: Case) -> None:
        """Sends the case and checks its answers, the logs and the stall watch."""
        assert self.watch is not None
        waits = any(f.waits for f in case.frames)
        self.watch.watch(case.node)
        ex = exchange(
            *self.cluster.address(case.node),
            case.data,
            checks.ANSWER_S,
            (lambda answers: checks.settled(case, answers)) if waits else None,
            checks.WAIT_S,
        )
        longest = self.watch.stop_watching()
        self.result.longest_ping = max(self.result.longest_ping, longest)
        self.result.answers[f"{case.frames[-1].kind} {ex.end}"] += 1
        logs = {n: self.cluster.new_log(n) for n in self.cluster.nodes.ids}
        if self.verbose:
            self._describe(case, ex, logs)
        for problem in checks.answer_problems(case, ex, logs[case.node]):
            self._finding(problem.kind, case, problem.detail, problem.cause)
        if longest >= checks.STALL_S:
            detail = (
                f"a ping to node {case.node} on another connection took {longest:.2f} s "
                f"(the case took {ex.seconds:.2f} s)"
            )
            self._finding(checks.STALL, case, detail, case.apis)
        for node, text in logs.items():
            for line in checks.logged_problems(text):
                self._finding(checks.LOGGED, case, f"node {node}: {line}", line)

    def _check_nodes(self, case: Case) -> list[int]:
        """The nodes that exited or hang (findings of `case`), to be restarted."""
        sick = []
        for node in self.cluster.nodes.ids:
            status = self.cluster.exited(node)
            if status is not None:
                lines = self.cluster.nodes.log_text(node).splitlines()[-3:]
                detail = f"node {node} exited with {status}: {' | '.join(lines)[-400:]}"
                self._finding(checks.CRASH, case, detail, f"{status} {lines[-1:]}")
                sick.append(node)
                continue
            first = self._ping(node)
            if first is None:
                continue
            second = self._ping(node)
            if second is None:
                detail = f"node {node}: {first}, then answered"
                self._finding(checks.STALL, case, detail, f"{case.apis}: health")
            else:
                self._finding(checks.HANG, case, f"node {node}: {first}, twice", case.apis)
                sick.append(node)
        return sick

    def _ping(self, node: int) -> str | None:
        """None when the node answers Metadata within STALL_S, else what went wrong."""
        try:
            took = self.health[node].ping(timeout_s=checks.STALL_S)
        except OSError as exc:
            return f"no Metadata answer within {checks.STALL_S:.0f} s ({type(exc).__name__})"
        return None if took < checks.STALL_S else f"a Metadata answer after {took:.2f} s"

    def _finding(self, kind: str, case: Case, detail: str, cause: str) -> None:
        """Records a finding, or counts it under the first case of the same kind and cause
        (numbers aside)."""
        key = (kind, _NUMBERS.sub("N", cause))
        known = self.result.findings.get(key)
        if known is not None:
            known.count += 1
            return
        finding = Finding(kind, case.label, detail)
        self.result.findings[key] = finding
        self._say(f"FINDING {finding}")
        apis = f" --api {','.join(map(str, self.apis))}" if self.apis else ""
        replay = f"python -m tests.kafka_fuzz --seed {case.seed} --case {case.number}{apis}"
        self._say(f"  replay: {replay}")

    def _describe(self, case: Case, ex: Exchange, logs: dict[int, str]) -> None:
        self._say(case.label)
        for i, frame in enumerate(case.frames, 1):
            shown = frame.data if len(frame.data) <= 512 else frame.data[:512]
            cut = "" if len(frame.data) <= 512 else f" ... ({len(frame.data)} bytes)"
            self._say(f"  frame {i} {frame.kind}: {frame.note}")
            self._say(f"    {shown.hex()}{cut}")
        self._say(f"  {len(ex.answers)} answer(s), connection {ex.end} after {ex.seconds:.3f} s")
        for answer in ex.answers:
            self._say(f"    {answer[:256].hex()}{' ...' if len(answer) > 256 else ''}")
        for node, text in logs.items():
            for line in text.splitlines()[-20:]:
                self._say(f"  node {node}: {line[:300]}")


def run(
    base: str,
    seed: int,
    cases: int,
    apis: list[int] | None = None,
    first: int = 0,
    max_recoveries: int = 10,
    budget_s: float | None = None,
    echo: bool = True,
    verbose: bool = False,
) -> FuzzResult:
    """`budget_s`: stop starting cases after this long."""
    os.makedirs(base, exist_ok=True)
    return Runner(base, seed, apis, echo, verbose).run(first, cases, max_recoveries, budget_s)


def api_keys(names: str) -> list[int]:
    """API keys from Kafka's names or numbers, comma-separated ("Produce,Fetch", "0,1")."""
    by_name = {a.name.lower(): a.key for a in SERVED.values()}
    keys = []
    for name in names.split(","):
        name = name.strip()
        keys.append(int(name) if name.isdigit() else by_name[name.lower()])
    return keys


def format_result(result: FuzzResult) -> str:
    lines = [
        f"seed {result.seed}: {result.cases} cases in {result.seconds:.1f} s, "
        f"{result.clusters} cluster(s), {result.recoveries} recoveries, "
        f"{len(result.findings)} finding(s); longest ping "
        f"during a case {result.longest_ping:.3f} s",
        "  last frames, connection ends: "
        + ", ".join(f"{k} {n}" for k, n in sorted(result.answers.items())),
    ]
    lines += [f"  note: {n}" for n in result.notes]
    lines += [f"  {f}" for f in result.findings.values()]
    return "\n".join(lines)
