"""An interaction harness for the Raft core, in the style of etcd-io/raft's datadriven tests.

A `Cluster` holds RaftCore nodes with MemoryRaftLogs, one manual clock per node and a message
queue that nothing delivers on its own: the script decides what is delivered, dropped or held
back, when each node's clock moves and when each node's Ready is processed. Every command
returns the text a script expects after its `----` line.

Determinism: every node gets a `ScriptedRandom` whose randrange() is 0 (so an election timeout
is exactly `election-timeout` and a candidate's backoff is 0) and whose choice() takes the
candidates in turn (an observer asks voter 1, then 2, then 3, ...). Nothing breaks ties, so
tick nodes one at a time where their timers must not fire together.

Commands (one per block; `<n>` is a node id, `all` means every node in id order):
    add-nodes voters=1,2,3 [observers=4] [election-timeout=100] [fetch-timeout=200]
              [backoff-max=100] [request-timeout=200] [fetch-max-wait=50]
              [fetch-max-entries=1000] [snapshot-chunk=1048576]
    tick <n|all> <ms>          time passes on that node's clock; the node is ticked at every
                               wake-up it asks for (next_wakeup_ms) up to the new time
    process-ready <n|all>      take the node's Ready: persist the election state, write what
                               it lists to the log (reset to a snapshot, truncate, append)
                               and fsync it, write the snapshot chunks it lists (the last one
                               completes the download: the next Ready, which installs it,
                               follows at once), queue the messages, apply the committed
                               entries; print all of it; then advance()
    deliver-msgs [from=N] [to=N] [type=Fetch] [drop=true]
                               deliver (or drop) the queued messages that match (type: the
                               name as printed, e.g. VoteResponse), oldest first;
                               what the receiver does with them goes into its next Ready
    stabilize [quiet]          process-ready and deliver-msgs for every node until nothing moves;
                               quiet prints only the role changes (dropped messages are not
                               shown: use it for setup, not for the steps a script is about)
    inject <Kind> <src>-><dst> [field=value...]
                               a message no node sent (a forgery, or an absurd one) is stepped
                               into <dst> at once; Kind is the message's class name
                               (BeginQuorumEpochRequest, FetchResponse, ...), fields its
                               dataclass fields (entries=O@E:data,O@E:data); a refused message
                               prints `refused: <the core's reason>`
    propose <n> <data...>      the node's state machine proposes records (one per word)
    resign <n>                 graceful resignation of a leader
    crash <n>                  power cut: what no Ready wrote yet (the core's unstable log
                               tail, a truncation) and everything not yet persisted is lost;
                               the node restarts from its persisted election state
    append-log <n> [epoch=E] <offset@epoch[:data]...>
                               write entries straight onto the node's disk (synced) and restart
                               it, its persisted epoch raised to E or to the last entry's epoch
                               if lower (with no vote); sets up divergent logs
    partition 1 | 2,3          messages between groups are dropped on delivery (nodes named in
                               no group form one more group); `heal` ends it
    snapshot <n> [end=O]       the node's state machine writes a snapshot of what it applied
                               below O (default: all it applied); its content is one line
                               `offset@epoch data` per entry, so loading it shows what it holds
    compact <n> end=O          log-prefix cleanup: the log starts at the snapshot ending at O
    delete-snapshots <n> end=O the node's snapshots older than the one ending at O go
    status [n]                 role, epoch, leader, vote, log end, last epoch, hw, clock (and
                               `start=O-E`, the snapshot the log starts at, once there is one)
    log <n>                    the node's entries, `offset@epoch data`

Message notation: `last=E/O` and `diverging=E/O` are an epoch and a log end offset (the epoch
of the last entry and the offset after it); `O@E` is one entry, at offset O of epoch E;
`snapshot=O-E` is a snapshot's id as its file is named (end offset, epoch), and a
FetchSnapshot chunk prints as `at=position` (and `size=`, `bytes=` in the response).
A role change prints as `n: <before> -> <after> (<the core's reason>)`, with `[t=..]` when a
timer caused it (the harness learns the reason by wrapping RaftCore._become).

After every command the harness checks safety invariants (one leader per epoch, a high
watermark never moves back, every node applies the same entry at an offset, every committed
entry stays on a majority of voters' synced logs) and raises InvariantViolation if one breaks.
"""

from __future__ import annotations

import dataclasses
import random
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from interaction_format import (
    fmt_entry,
    fmt_entry_data,
    fmt_message,
    fmt_snapshot,
    fmt_state,
    leader_name,
    message_kind,
)

from raft import messages
from raft.config import RaftConfig
from raft.core import NotLeaderError, RaftCore
from raft.log import MemoryRaftLog
from raft.messages import (
    NO_LEADER,
    ElectionState,
    Entry,
    Message,
    Ready,
    SnapshotId,
)
from raft.ready_reads import LogOverlay, carry_out_reads
from raft.roles import Role
from raft.snapshots import MemorySnapshotStore, write_snapshot_chunk
from raft.unstable_log import write_to

# Small numbers so that a script's times read at a glance.
SCRIPT_CONFIG = RaftConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    election_backoff_max_ms=100,
    request_timeout_ms=200,
    fetch_max_wait_ms=50,
)
_CONFIG_ARGS = {
    "election-timeout": "election_timeout_ms",
    "fetch-timeout": "fetch_timeout_ms",
    "backoff-max": "election_backoff_max_ms",
    "request-timeout": "request_timeout_ms",
    "fetch-max-wait": "fetch_max_wait_ms",
    "fetch-max-entries": "fetch_max_entries",
    "snapshot-chunk": "fetch_snapshot_max_bytes",
}
MAX_STABILIZE_ROUNDS = 100


class ScriptError(Exception):
    """The script itself is wrong (unknown command, bad argument)."""


class InvariantViolation(AssertionError):
    """The cluster reached a state that Raft's safety properties forbid."""


class ScriptedRandom(random.Random):
    """No randomness at all: randrange() is always 0 and choice() goes round in order."""

    def __init__(self) -> None:
        super().__init__(0)
        self._turn = 0

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return 0 if stop is None else start

    def choice(self, seq: Sequence[Any]) -> Any:
        picked = seq[self._turn % len(seq)]
        self._turn += 1
        return picked


# --- the cluster -----------------------------------------------------------------------------


@dataclass
class Node:
    node_id: int
    voter: bool
    log: MemoryRaftLog
    rng: ScriptedRandom
    core: RaftCore
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    # The state machine: one line `offset@epoch data` per entry applied, from a loaded
    # snapshot on (its lines first).
    state: list[str] = field(default_factory=list)
    persisted: ElectionState = field(default_factory=ElectionState)
    now: int = 0
    applied: list[Entry] = field(default_factory=list)  # this incarnation's applied entries
    last_hw: int = 0  # this incarnation's highest high watermark seen
    transitions: list[tuple[str, str]] = field(default_factory=list)  # (reason, new summary)

    def start(self, core: RaftCore) -> None:
        """Takes `core` as this node's (new) core and records its role changes: the harness
        wraps the core's one transition function to learn the reason of each."""
        self.core = core
        become = getattr(core, "_become", None)
        if become is None:  # renamed: role changes then print without their reason
            return

        def recording_become(role: Role, epoch: int, why: str, **kwargs: Any) -> None:
            become(role, epoch, why, **kwargs)
            self.transitions.append((why, self.summary()))

        core._become = recording_become  # type: ignore[method-assign]

    def summary(self) -> str:
        c = self.core
        text = f"{c.role.value} epoch={c.epoch}"
        if c.leader_id != NO_LEADER:
            text += f" leader={c.leader_id}"
        if c.voted_for != NO_LEADER:
            text += f" voted={c.voted_for}"
        return text


class Cluster:
    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.voters: frozenset[int] = frozenset()
        self.config = SCRIPT_CONFIG
        self.queue: list[Message] = []
        self.groups: dict[int, int] | None = None  # node -> partition group
        # Invariant bookkeeping across the whole run.
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: dict[int, Entry] = {}  # offset -> the entry applied there

    # --- running commands ------------------------------------------------------------------

    def run(self, line: str) -> str:
        words = shlex.split(line)
        if not words:
            raise ScriptError("empty command")
        handler: Callable[[list[str]], list[str]] | None = getattr(
            self, "cmd_" + words[0].replace("-", "_"), None
        )
        if handler is None:
            raise ScriptError(f"unknown command {words[0]!r}")
        out = handler(words[1:])
        self.check_invariants()
        return "\n".join(out) if out else "ok"

    def _node(self, word: str) -> Node:
        try:
            return self.nodes[int(word)]
        except (ValueError, KeyError):
            raise ScriptError(f"no node {word!r}") from None

    def _targets(self, args: list[str]) -> list[Node]:
        if not args or args[0] == "all":
            return [self.nodes[i] for i in sorted(self.nodes)]
        return [self._node(args[0])]

    @staticmethod
    def _kwargs(args: list[str]) -> dict[str, str]:
        out = {}
        for arg in args:
            key, sep, value = arg.partition("=")
            if not sep:
                raise ScriptError(f"expected key=value, got {arg!r}")
            out[key] = value
        return out

    def _watch(self, nodes: list[Node], action: Callable[[], None]) -> list[str]:
        """Runs `action` and reports the role changes it caused, each with the core's reason."""
        before = {n.node_id: n.summary() for n in nodes}
        for n in nodes:
            n.transitions.clear()
        action()
        out = []
        for n in nodes:
            prev = before[n.node_id]
            for why, after in n.transitions:
                out.append(f"{n.node_id}: {prev} -> {after} ({why})")
                prev = after
            if prev != n.summary():
                out.append(f"{n.node_id}: {prev} -> {n.summary()}")
        return out

    # --- setup -----------------------------------------------------------------------------

    def cmd_add_nodes(self, args: list[str]) -> list[str]:
        kw = self._kwargs(args)
        voters = [int(v) for v in kw.pop("voters").split(",")]
        observers = [int(v) for v in kw.pop("observers", "").split(",") if v]
        changes = {}
        for key, value in kw.items():
            if key not in _CONFIG_ARGS:
                raise ScriptError(f"unknown add-nodes argument {key!r}")
            changes[_CONFIG_ARGS[key]] = int(value)
        self.config = RaftConfig(**{**_config_dict(SCRIPT_CONFIG), **changes})
        self.voters = frozenset(voters)
        for node_id in voters + observers:
            log = MemoryRaftLog()
            rng = ScriptedRandom()
            snapshots = MemorySnapshotStore()
            core = RaftCore(
                node_id, self.voters, log, ElectionState(), self.config, rng, 0, snapshots
            )
            self.nodes[node_id] = Node(node_id, node_id in self.voters, log, rng, core, snapshots)
            self.nodes[node_id].start(core)
        c = self.config
        out = [
            f"config: election-timeout={c.election_timeout_ms} fetch-timeout={c.fetch_timeout_ms}"
            f" check-quorum={c.check_quorum_timeout_ms} backoff-max={c.election_backoff_max_ms}"
            f" request-timeout={c.request_timeout_ms} fetch-max-wait={c.fetch_max_wait_ms}"
            f" fetch-max-entries={c.fetch_max_entries}"
            + (
                f" snapshot-chunk={c.fetch_snapshot_max_bytes}"
                if c.fetch_snapshot_max_bytes != SCRIPT_CONFIG.fetch_snapshot_max_bytes
                else ""
            )
        ]
        return out + [self._status_line(self.nodes[i]) for i in voters + observers]

    def cmd_append_log(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        entries = []
        epoch = 0
        for word in args[1:]:
            if word.startswith("epoch="):
                epoch = int(word.removeprefix("epoch="))
                continue
            spot, _, data = word.partition(":")
            offset, _, entry_epoch = spot.partition("@")
            entries.append(Entry(int(offset), int(entry_epoch), data.encode()))
        node.log.append(entries)
        node.log.sync()
        epoch = max(epoch, node.log.last_epoch())
        if node.persisted.epoch < epoch:
            node.persisted = ElectionState(epoch)
        self._restart(node)
        return [self._status_line(node)]

    def _restart(self, node: Node) -> None:
        node.rng = ScriptedRandom()
        node.state = []
        node.start(
            RaftCore(
                node.node_id,
                self.voters,
                node.log,
                node.persisted,
                self.config,
                node.rng,
                node.now,
                node.snapshots,
            )
        )
        node.applied = []
        node.last_hw = 0

    # --- time, Ready, messages -------------------------------------------------------------

    def cmd_tick(self, args: list[str]) -> list[str]:
        if len(args) != 2:
            raise ScriptError("usage: tick <node|all> <ms>")
        out: list[str] = []
        for node in self._targets(args[:1]):
            out += self._tick(node, node.now + int(args[1]))
        return out

    def _tick(self, node: Node, target: int) -> list[str]:
        """Ticks the node at every wake-up it asks for up to `target`, then at `target`."""
        out: list[str] = []
        same_time = 0
        while (wake := node.core.next_wakeup_ms()) <= target:
            at = max(wake, node.now)
            same_time = same_time + 1 if at == node.now else 0
            if same_time > 5:
                raise ScriptError(
                    f"node {node.node_id} keeps asking to wake at {wake} (now {node.now}): "
                    "a driver would spin"
                )
            node.now = at
            out += [f"[t={at}] {c}" for c in self._watch([node], partial(node.core.tick, at))]
        node.now = target
        out += [f"[t={target}] {c}" for c in self._watch([node], partial(node.core.tick, target))]
        return out

    def cmd_process_ready(self, args: list[str]) -> list[str]:
        out: list[str] = []
        for node in self._targets(args):
            if node.core.has_ready():
                out += self._process_ready(node)
            elif args and args[0] != "all":
                out.append(f"> {node.node_id}: no Ready")
        return out or ["no Ready"]

    def _process_ready(self, node: Node) -> list[str]:
        ready: Ready = node.core.ready()
        out = [f"> {node.node_id} handling Ready"]
        # What the Ready names to read (fetch answers, snapshot chunks, committed entries), as
        # raft/ready_handler.py does: the core read no entry itself.
        done = carry_out_reads(ready, node.log, node.snapshots)
        if ready.election_state is not None:
            node.persisted = ready.election_state
            out.append(f"  persist: {fmt_state(ready.election_state)}")
        writes = ready.log_writes
        if writes.reset is not None:
            out.append(f"  reset log to snapshot {fmt_snapshot(writes.reset)}")
        if writes.truncate_to is not None:
            out.append(f"  truncate log to {writes.truncate_to}")
        if writes.entries:
            out.append(f"  append: {' '.join(fmt_entry(e) for e in writes.entries)}")
        write_to(node.log, writes)
        if ready.sync_log:
            node.log.sync()
            out.append(f"  sync log: end={ready.log_end_offset}")
        stored = False
        for chunk in ready.snapshot_chunks:
            complete = write_snapshot_chunk(node.snapshots, chunk)
            out.append(
                f"  write snapshot {fmt_snapshot(chunk.snapshot_id)} at={chunk.position} "
                f"bytes={len(chunk.data)}"
                + (
                    f" (last: {'complete' if complete else 'damaged, dropped'})"
                    if chunk.last
                    else ""
                )
            )
            if chunk.last:
                node.core.snapshot_stored(chunk.snapshot_id, complete)
                stored = True
        messages = done.messages(ready)
        if messages:
            out.append("  send:")
            out += [f"  {fmt_message(m)}" for m in messages]
            self.queue.extend(messages)
        if ready.load_snapshot is not None:
            data = node.snapshots.snapshots[ready.load_snapshot]
            node.state = data.decode().splitlines()
            out.append(f"  load snapshot {fmt_snapshot(ready.load_snapshot)}:")
            out += [f"  {line}" for line in node.state] or ["  (empty)"]
            self._check_snapshot(node, ready.load_snapshot)
        if done.committed:
            out.append(f"  apply (hw={ready.high_watermark}):")
            out += [f"  {fmt_entry_data(e)}" for e in done.committed]
            node.applied.extend(done.committed)
            node.state += [fmt_entry_data(e) for e in done.committed]
        if ready.leader_change is not None:
            lc = ready.leader_change
            out.append(f"  leader change: leader={leader_name(lc.leader_id)} epoch={lc.epoch}")
        node.core.advance(ready)
        if stored and node.core.has_ready():
            # What snapshot_stored() did (install the snapshot, fetch on) is the next Ready's;
            # a driver carries it out at once, and so does this command.
            out += self._process_ready(node)
        return out

    def cmd_deliver_msgs(self, args: list[str]) -> list[str]:
        kw = self._kwargs(args)
        unknown = set(kw) - {"from", "to", "type", "drop"}
        if unknown:
            raise ScriptError(f"unknown deliver-msgs arguments {sorted(unknown)}")
        src = int(kw["from"]) if "from" in kw else None
        dst = int(kw["to"]) if "to" in kw else None
        kind = kw.get("type")
        drop = kw.get("drop", "false") == "true"
        picked = [
            m
            for m in self.queue
            if (src is None or m.src == src)
            and (dst is None or m.dst == dst)
            and (kind is None or message_kind(m) == kind)
        ]
        self.queue = [m for m in self.queue if all(m is not p for p in picked)]
        return self._deliver(picked, drop) or ["no messages"]

    def _deliver(self, messages: list[Message], drop: bool = False) -> list[str]:
        out: list[str] = []
        for m in messages:
            if drop:
                out.append(f"{fmt_message(m)} (dropped)")
                continue
            if self._cut(m.src, m.dst):
                out.append(f"{fmt_message(m)} (dropped: partition)")
                continue
            out.append(fmt_message(m))
            out += ["  " + line for line in self._step(m)]
        return out

    def _step(self, m: Message) -> list[str]:
        node = self.nodes[m.dst]
        refusals: list[str] = []

        def step() -> None:
            refused = node.core.step(m)
            if refused is not None:
                refusals.append(f"refused: {refused}")

        return refusals + self._watch([node], step)

    def cmd_inject(self, args: list[str]) -> list[str]:
        if len(args) < 2 or "->" not in args[1]:
            raise ScriptError("usage: inject <Kind> <src>-><dst> [field=value...]")
        kind = getattr(messages, args[0], None)
        if kind is None or not dataclasses.is_dataclass(kind):
            raise ScriptError(f"no message kind {args[0]!r}")
        src, _, dst = args[1].partition("->")
        values: dict[str, Any] = {"src": int(src), "dst": int(dst)}
        types = {f.name: f.type for f in dataclasses.fields(kind)}
        for key, text in self._kwargs(args[2:]).items():
            if key not in types:
                raise ScriptError(f"{args[0]} has no field {key!r}")
            values[key] = _field_value(str(types[key]), text)
        try:
            message = kind(**values)
        except TypeError as e:
            raise ScriptError(str(e)) from None
        return [f"{fmt_message(message)} (injected)"] + [
            "  " + line for line in self._step(message)
        ]

    def _cut(self, a: int, b: int) -> bool:
        if self.groups is None:
            return False
        return self.groups.get(a, -1) != self.groups.get(b, -1)

    def cmd_stabilize(self, args: list[str]) -> list[str]:
        if args not in ([], ["quiet"]):
            raise ScriptError("usage: stabilize [quiet]")
        out: list[str] = []
        for _ in range(MAX_STABILIZE_ROUNDS):
            moved = False
            for node in self._targets([]):
                if node.core.has_ready():
                    out += self._process_ready(node)
                    moved = True
            for node_id in sorted(self.nodes):
                inbox = [m for m in self.queue if m.dst == node_id]
                if inbox:
                    self.queue = [m for m in self.queue if m.dst != node_id]
                    out.append(f"> {node_id} receiving messages")
                    out += ["  " + line for line in self._deliver(inbox)]
                    moved = True
            if not moved:
                if args == ["quiet"]:
                    return [line.strip() for line in out if " -> " in line]
                return out
        raise ScriptError(f"no quiet state after {MAX_STABILIZE_ROUNDS} rounds")

    # --- the application's calls -----------------------------------------------------------

    def cmd_propose(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        records = [word.encode() for word in args[1:]]
        result: list[str] = []

        def act() -> None:
            try:
                last = node.core.propose(records)
                result.append(f"appended up to offset {last}")
            except NotLeaderError as e:
                result.append(f"error: {e}")

        changes = self._watch([node], act)
        return result + changes

    def cmd_resign(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        return self._watch([node], node.core.resign)

    def cmd_snapshot(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        kw = self._kwargs(args[1:])
        end = int(kw.get("end", node.core.applied))
        try:
            snapshot_id = node.core.snapshot_id_for(end)
        except ValueError as e:
            return [f"error: {e}"]
        lines = [line for line in node.state if int(line.split("@")[0]) < end]
        data = "".join(line + "\n" for line in lines).encode()
        node.snapshots.create(snapshot_id, data)
        return [f"snapshot {fmt_snapshot(snapshot_id)}: {len(lines)} entries, {len(data)} bytes"]

    def _snapshot_at(self, node: Node, args: list[str]) -> SnapshotId:
        end = int(self._kwargs(args).get("end", -1))
        for snapshot_id in node.snapshots.snapshots:
            if snapshot_id.end_offset == end:
                return snapshot_id
        raise ScriptError(f"node {node.node_id} has no snapshot ending at {end}")

    def cmd_compact(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        try:
            node.core.compact_log(self._snapshot_at(node, args[1:]))
        except ValueError as e:
            return [f"error: {e}"]
        return [self._status_line(node)]

    def cmd_delete_snapshots(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        node.snapshots.delete_before(self._snapshot_at(node, args[1:]))
        left = " ".join(fmt_snapshot(s) for s in sorted(node.snapshots.snapshots))
        return [f"{node.node_id} snapshots: {left}"]

    def _check_snapshot(self, node: Node, snapshot_id: SnapshotId) -> None:
        """A loaded snapshot holds exactly the committed entries below its end."""
        for line in node.state:
            offset = int(line.split("@")[0])
            known = self.committed.get(offset)
            if known is not None and fmt_entry_data(known) != line:
                raise InvariantViolation(
                    f"node {node.node_id} loaded snapshot {fmt_snapshot(snapshot_id)} with "
                    f"{line!r} at offset {offset}, committed there: {fmt_entry_data(known)}"
                )
        if len(node.state) != snapshot_id.end_offset:
            raise InvariantViolation(
                f"snapshot {fmt_snapshot(snapshot_id)} holds {len(node.state)} entries"
            )

    def cmd_crash(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        lost = list(node.core.log.tail)  # never handed to a Ready: only in memory
        before = node.summary()
        node.log.crash()
        node.snapshots.crash()
        self._restart(node)
        out = [f"{node.node_id}: {before} -> crashed"]
        if lost:
            out.append(f"  lost unsynced entries: {' '.join(fmt_entry(e) for e in lost)}")
        out.append(f"  restart from persisted {fmt_state(node.persisted)}")
        out.append(f"  {self._status_line(node)}")
        return out

    # --- the network -----------------------------------------------------------------------

    def cmd_partition(self, args: list[str]) -> list[str]:
        groups: dict[int, int] = {}
        for index, group in enumerate(" ".join(args).split("|")):
            for word in group.replace(",", " ").split():
                groups[self._node(word).node_id] = index
        self.groups = groups
        return []

    def cmd_heal(self, args: list[str]) -> list[str]:
        self.groups = None
        return []

    # --- looking ---------------------------------------------------------------------------

    def _status_line(self, node: Node) -> str:
        c = node.core
        wake = c.next_wakeup_ms()
        kind = "" if node.voter else " (observer)"
        start = c.log.start()
        where = f" start={fmt_snapshot(start)}" if start.end_offset else ""
        return (
            f"{node.node_id}: {node.summary()}{where} end={c.log.end_offset()}"
            f" last-epoch={c.log.last_epoch()} hw={c.high_watermark} t={node.now}"
            f" wake={'never' if wake >= 2**62 else wake}{kind}"
        )

    def cmd_status(self, args: list[str]) -> list[str]:
        return [self._status_line(n) for n in self._targets(args)]

    def cmd_log(self, args: list[str]) -> list[str]:
        node = self._node(args[0])
        out = []
        log = node.core.log  # what the core sees: the stable log and its unstable tail
        start = log.start()
        if start.end_offset:
            out.append(f"(starts at snapshot {fmt_snapshot(start)})")
        view = LogOverlay(node.log, log.writes())
        for entry in view.read(start.end_offset, log.end_offset() - start.end_offset):
            text = fmt_entry_data(entry)
            if entry.offset >= log.unstable_offset:
                text += " (unsynced)"
            out.append(text)
        return out or ["(empty)"]

    # --- invariants ------------------------------------------------------------------------

    def check_invariants(self) -> None:
        for node in self.nodes.values():
            c = node.core
            if c.role is Role.LEADER:
                first = self.leader_of_epoch.setdefault(c.epoch, node.node_id)
                if first != node.node_id:
                    raise InvariantViolation(
                        f"two leaders in epoch {c.epoch}: {first} and {node.node_id}"
                    )
            if c.high_watermark < node.last_hw:
                raise InvariantViolation(
                    f"node {node.node_id}: high watermark moved back "
                    f"from {node.last_hw} to {c.high_watermark}"
                )
            node.last_hw = c.high_watermark
            for entry in node.applied:
                known = self.committed.setdefault(entry.offset, entry)
                if known != entry:
                    raise InvariantViolation(
                        f"node {node.node_id} applied {fmt_entry_data(entry)} at offset "
                        f"{entry.offset}, another node applied {fmt_entry_data(known)}"
                    )
        majority = len(self.voters) // 2 + 1
        for entry in self.committed.values():
            holders = [n.node_id for n in self.nodes.values() if n.voter and _holds(n, entry)]
            if len(holders) < majority:
                raise InvariantViolation(
                    f"committed entry {fmt_entry_data(entry)} is on the synced logs of "
                    f"voters {holders} only, not a majority"
                )


def _holds(node: Node, entry: Entry) -> bool:
    """Whether the node's disk keeps the committed entry: on its synced log, or in the
    snapshot its log starts at (which holds only committed entries)."""
    index = entry.offset - node.log.start_offset
    if index < 0:
        return True
    return index < node.log.synced and node.log.entries[index] == entry


def _field_value(kind: str, text: str) -> Any:
    """A message field's value from a script word, by the field's annotation."""
    if kind == "bool":
        return text == "true"
    if kind == "int":
        return int(text)
    if kind == "str":
        return text
    if kind.startswith("tuple[Entry"):
        entries = []
        for word in text.split(",") if text else []:
            spot, _, data = word.partition(":")
            offset, _, epoch = spot.partition("@")
            entries.append(Entry(int(offset), int(epoch), data.encode()))
        return tuple(entries)
    if kind.startswith("tuple[int"):
        return tuple(int(v) for v in text.split(",") if v)
    raise ScriptError(f"inject cannot set a field of type {kind}")


def _config_dict(config: RaftConfig) -> dict[str, int]:
    return {name: getattr(config, name) for name in RaftConfig.__dataclass_fields__}
