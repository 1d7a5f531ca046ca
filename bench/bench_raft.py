"""Raft: commit throughput, commit latency and leader failover of three Strom voter processes,
against a three-member etcd cluster in the same run.

    python bench/bench_raft.py [--quick]

Strom: three voter processes on loopback (tests/raft_integration: a RaftDriver each, real
gRPC between them, the metadata log fsynced on disk, default timeouts), as two clusters:
Kafka's defaults (`controller.quorum.append.linger.ms=25`) and the linger at 0. etcd (when
`etcd` is on the PATH; Debian: `apt-get install etcd-server`; else the comparison is
skipped): three members on loopback with their defaults (heartbeat 100 ms, election timeout
1000 ms, WAL fsynced per batch). All three clusters run at once, data dirs in one temp dir;
only the one under test gets calls, the others idle.

1. Commit throughput and latency: 1 and 16 appender threads, each with its own connection
   to the leader, each doing one synchronous append of one 100-byte record at a time (the
   call returns once the record is committed). Strom: a gRPC unary call to the leader's
   test control service, `strom.test.RaftNode/Append` (the ProcessCluster append path).
   etcd: `POST /v3/kv/put` (base64 key and value, one key per thread) through etcd's v3 JSON
   gateway on the leader, over an `http.client` keep-alive connection. After a warm-up,
   committed records/s and p50/p99 latency over a fixed window, and the CPU each process
   used in it (share of one core; "client" is this process). The reps run interleaved
   across the clusters; figures are medians over the reps. First, once per cluster, the
   "RPC floor": the same client and threads calling a method that involves no consensus
   (Strom: the control service's Status; etcd: a serializable range read), i.e. what the
   client, the transport and the server's RPC layer cost on their own.
2. Failover: one commit, then kill -9 of the leader (or SIGTERM: Strom's leader resigns with
   EndQuorumEpoch, etcd's transfers its leadership); we poll the survivors' status every
   5 ms until one says it leads, then append to it until that commits. Printed per round:
   signal -> new leader seen, signal -> first commit on the new leader, and how far the
   epoch (etcd: the term) moved (+1 unless an election failed and was retried); reported:
   the medians. The stopped node is restarted and caught up between rounds.

Ratios are Strom / etcd. Everything started is killed and the temp dir deleted, also on
failure or SIGTERM; a failed part is printed and the rest still runs.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "raft_integration")
)
from process_cluster import ProcessCluster, free_ports, wait_until  # noqa: E402

SIZES = {
    "full": dict(warmup=1.0, window=4.0, reps=3, floor_window=2.0, rounds=5),
    "quick": dict(warmup=0.5, window=2.0, reps=1, floor_window=1.0, rounds=2),
}
RECORD = 100  # bytes per record value
CONCURRENCY = (1, 16)
STROM_CONFIGS = {
    "linger 25 ms (default)": [],
    "linger 0": ["controller.quorum.append.linger.ms=0"],
}
CLK_TCK = os.sysconf("SC_CLK_TCK")

ROWS: list[tuple[str, str, str, str, str]] = []  # the final table


# --- helpers -----------------------------------------------------------------------------


def report(what: str, ours: str, ref: str, ratio: float | None, goal: str = "") -> None:
    ROWS.append((what, ours, ref, "" if ratio is None else f"{ratio:.2f}", goal))


def value(thread: int, i: int) -> bytes:
    """A distinct 100-byte record; printable, as the control service splits on b"\\n"."""
    return (b"%02d-%010d-" % (thread, i)).ljust(RECORD, b"x")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pct(xs: list[float], q: int) -> float:
    if len(xs) < 2:
        return xs[0] if xs else float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


@dataclass
class Load:
    threads: int
    seconds: float
    count: int
    errors: int
    latencies: list[float]
    cpu: dict[str, float]  # process name -> share of one core over the window

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def describe(self) -> str:
        cpu = ", ".join(f"{k} {v:.0%}" for k, v in self.cpu.items())
        per = sum(self.cpu.values()) * self.seconds / max(self.count, 1) * 1e6
        return (
            f"{self.rate:,.0f}/s, p50 {pct(self.latencies, 50) * 1e3:.2f} ms, "
            f"p99 {pct(self.latencies, 99) * 1e3:.2f} ms, {self.errors} errors; "
            f"CPU (share of a core) {cpu}; {per:.0f} us CPU per call in all"
        )


def run_load(
    make_client: Callable[[int], tuple[Callable[[bytes], None], Callable[[], None]]],
    threads: int,
    warmup: float,
    window: float,
    pids: dict[str, int],
) -> Load:
    """`threads` threads, each with its own client (`make_client(thread)` -> call, close)
    calling in a loop; counts the calls that complete inside the window after `warmup`."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors = [0] * threads
    ready = threading.Barrier(threads + 1)
    times: dict[str, float] = {}

    def worker(t: int) -> None:
        call, close = make_client(t)
        try:
            ready.wait()
            i = 0
            start, end = times["start"], times["end"]
            while True:
                before = time.perf_counter()
                if before >= end:
                    break
                try:
                    call(value(t, i))
                except Exception:
                    errors[t] += 1
                    time.sleep(0.01)
                    continue
                after = time.perf_counter()
                i += 1
                if start <= after < end:
                    latencies[t].append(after - before)
        finally:
            close()

    workers = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    now = time.perf_counter()
    times["start"], times["end"] = now + warmup, now + warmup + window
    ready.wait()
    time.sleep(max(0.0, times["start"] - time.perf_counter()))
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    cpu0["client"] = time.process_time()
    time.sleep(max(0.0, times["end"] - time.perf_counter()))
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) / window for name, pid in pids.items()}
    cpu["client"] = (time.process_time() - cpu0["client"]) / window
    for w in workers:
        w.join(timeout=30)
    flat = [x for xs in latencies for x in xs]
    return Load(threads, window, len(flat), sum(errors), flat, cpu)


@dataclass
class Failover:
    elected: float  # signal -> a survivor says it leads
    committed: float  # signal -> first commit on it
    epochs: int  # how far the epoch (etcd: the term) moved: 1 unless an election failed


# --- Strom -------------------------------------------------------------------------------


class Strom:
    """Three voters (ProcessCluster) and what the workloads need of them."""

    name = "Strom"

    def __init__(self, base_dir: str, config: list[str]) -> None:
        self.cluster = ProcessCluster(base_dir, voters=3, config=config)

    def start(self) -> None:
        self.cluster.start_all()
        self.cluster.wait_for_leader(timeout_s=30)
        self.cluster.append_until_committed([b"warm-up"], timeout_s=30)

    def stop(self) -> None:
        self.cluster.stop_all()

    def leader(self) -> int:
        return self.cluster.wait_for_leader(timeout_s=30)

    def pids(self) -> dict[str, int]:
        leader = self.leader()
        return {
            ("leader" if n == leader else f"follower{n}"): p.pid
            for n, p in sorted(self.cluster.procs.items())
        }

    def _client(self, method: str) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        port = self.cluster.control_port[self.leader()]

        def make(thread: int) -> tuple[Callable[[bytes], None], Callable[[], None]]:
            # A channel of its own (its own TCP connection), as each etcd thread has its own.
            channel = grpc.insecure_channel(
                f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
            )
            stub = channel.unary_unary(f"/strom.test.RaftNode/{method}")

            def call(record: bytes) -> None:
                reply = stub(record if method == "Append" else b"", timeout=10)
                if reply.startswith(b"ERR"):
                    raise RuntimeError(reply.decode())

            return call, channel.close

        return make

    def appender(self) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        return self._client("Append")

    def floor(self) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        return self._client("Status")

    def commit_once(self, node: int) -> bool:
        return self.cluster.append([b"probe-%d" % time.monotonic_ns()], node=node) is not None

    def failover(self, sig: int) -> Failover:
        cluster = self.cluster
        old = self.leader()
        old_epoch = (cluster.status(old) or {}).get("epoch", 0)
        cluster.append_until_committed([b"before-failover"])  # followers just heard from it
        proc = cluster.procs[old]
        survivors = [n for n in cluster.procs if n != old]
        start = time.monotonic()
        proc.send_signal(sig)
        elected = committed = None
        while committed is None:
            if time.monotonic() - start > 60:
                raise TimeoutError("no commit on a new leader within 60 s")
            for node in survivors:
                status = cluster.status(node)
                if status and status["role"] == "Leader" and status["epoch"] > old_epoch:
                    elected = elected or time.monotonic() - start
                    new_epoch = status["epoch"]
                    if self.commit_once(node):
                        committed = time.monotonic() - start
                        break
            else:
                time.sleep(0.005)
        proc.wait(timeout=15)
        cluster.kill(old)  # bookkeeping only: it has exited
        cluster.start(old)
        self._wait_caught_up()
        return Failover(elected or committed, committed, new_epoch - old_epoch)

    def _wait_caught_up(self) -> None:
        last: list[Any] = []

        def caught_up() -> bool:
            statuses = [self.cluster.status(n) for n in self.cluster.voter_ids]
            last[:] = statuses
            if any(s is None for s in statuses):
                return False
            leaders = [s for s in statuses if s and s["role"] == "Leader"]
            followers = [s for s in statuses if s and s["role"] == "Follower"]
            return (
                len(leaders) == 1
                and len(followers) == 2
                and all(s["applied"] >= leaders[0]["applied"] for s in followers)
            )

        self.commit_once(self.leader())
        try:
            wait_until(caught_up, 30, "the restarted node to catch up")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; last statuses: {last}") from None
        time.sleep(0.5)


# --- etcd --------------------------------------------------------------------------------


class Etcd:
    """Three etcd members on loopback; their v3 JSON gateway is the client API."""

    name = "etcd"

    def __init__(self, base_dir: str, binary: str) -> None:
        self.base_dir = base_dir
        self.binary = binary
        ports = free_ports(6)
        self.peer_port = dict(zip((1, 2, 3), ports[:3], strict=True))
        self.client_port = dict(zip((1, 2, 3), ports[3:], strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.member_ids: dict[str, int] = {}  # etcd member id -> our member number
        self._conns: dict[int, http.client.HTTPConnection] = {}

    def start_member(self, m: int) -> None:
        peer = f"http://127.0.0.1:{self.peer_port[m]}"
        client = f"http://127.0.0.1:{self.client_port[m]}"
        initial = ",".join(f"e{i}=http://127.0.0.1:{p}" for i, p in self.peer_port.items())
        args = [
            self.binary,
            f"--name=e{m}",
            f"--data-dir={os.path.join(self.base_dir, f'e{m}')}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=strom-bench",
            "--logger=zap",
            "--log-outputs=stderr",
            "--log-level=warn",
        ]
        log = open(os.path.join(self.base_dir, f"e{m}.log"), "ab")  # noqa: SIM115
        try:
            self.procs[m] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()

    def start(self) -> None:
        for m in (1, 2, 3):
            self.start_member(m)
        wait_until(lambda: all(self.healthy(m) for m in (1, 2, 3)), 30, "etcd to be healthy")
        for m in (1, 2, 3):
            status = self.status(m)
            if status is None:
                raise RuntimeError(f"etcd member e{m} does not answer its status")
            self.member_ids[status["header"]["member_id"]] = m
        self.put(self.leader(), b"warm-up", b"warm-up")

    def stop(self) -> None:
        for conn in self._conns.values():
            conn.close()
        for proc in self.procs.values():
            proc.kill()
        for proc in self.procs.values():
            proc.wait(timeout=15)
        self.procs.clear()

    def _post(self, m: int, path: str, body: dict[str, Any], timeout: float = 2) -> Any:
        """One JSON request on this member's shared connection (main thread only); None on
        any failure."""
        conn = self._conns.get(m)
        if conn is None:
            conn = self._conns[m] = http.client.HTTPConnection(
                "127.0.0.1", self.client_port[m], timeout=timeout
            )
        try:
            conn.request("POST", path, json.dumps(body).encode())
            response = conn.getresponse()
            data = response.read()
            return json.loads(data) if response.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError):
            conn.close()
            del self._conns[m]
            return None

    def healthy(self, m: int) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.client_port[m], timeout=2)
            conn.request("GET", "/health")
            ok = json.loads(conn.getresponse().read()).get("health") == "true"
            conn.close()
            return bool(ok)
        except (OSError, http.client.HTTPException, ValueError):
            return False

    def status(self, m: int) -> dict[str, Any] | None:
        status: dict[str, Any] | None = self._post(m, "/v3/maintenance/status", {})
        return status

    def leader(self) -> int:
        def find() -> int | None:
            for m in self.procs:
                s = self.status(m)
                if s and s.get("leader") == s["header"]["member_id"]:
                    return m
            return None

        return wait_until(find, 30, "an etcd leader")

    def put(self, m: int, key: bytes, val: bytes, timeout: float = 2) -> bool:
        body = {"key": base64.b64encode(key).decode(), "value": base64.b64encode(val).decode()}
        reply = self._post(m, "/v3/kv/put", body, timeout)
        return reply is not None and "error" not in reply

    def pids(self) -> dict[str, int]:
        leader = self.leader()
        return {
            ("leader" if m == leader else f"follower{m}"): p.pid
            for m, p in sorted(self.procs.items())
        }

    def _client(self, path: str) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        port = self.client_port[self.leader()]

        def make(thread: int) -> tuple[Callable[[bytes], None], Callable[[], None]]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            key = base64.b64encode(b"bench/%02d" % thread).decode()
            head = {"Content-Type": "application/json"}

            def call(record: bytes) -> None:
                if path == "/v3/kv/put":
                    body = {"key": key, "value": base64.b64encode(record).decode()}
                else:
                    body = {"key": key, "serializable": True}
                conn.request("POST", path, json.dumps(body).encode(), head)
                response = conn.getresponse()
                data = response.read()
                if response.status != 200 or b'"error"' in data:
                    raise RuntimeError(data.decode(errors="replace"))

            return call, conn.close

        return make

    def appender(self) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        return self._client("/v3/kv/put")

    def floor(self) -> Callable[[int], tuple[Callable[[bytes], None], Any]]:
        return self._client("/v3/kv/range")

    def failover(self, sig: int) -> Failover:
        old = self.leader()
        old_id = next(i for i, m in self.member_ids.items() if m == old)
        terms = [self.status(m) for m in self.procs]
        old_term = max(int(t["raftTerm"]) for t in terms if t)
        self.put(old, b"before-failover", b"x")
        proc = self.procs[old]
        survivors = [m for m in self.procs if m != old]
        start = time.monotonic()
        proc.send_signal(sig)
        elected = committed = None
        while committed is None:
            if time.monotonic() - start > 60:
                raise TimeoutError("no commit on a new etcd leader within 60 s")
            for m in survivors:
                s = self.status(m)
                if s and s.get("leader") == s["header"]["member_id"] != old_id:
                    elected = elected or time.monotonic() - start
                    if self.put(m, b"probe", b"x"):
                        committed = time.monotonic() - start
                        # Read after the commit: while a leader takes over, the status may
                        # name it leader with the term of the one before.
                        new_term = int((self.status(m) or s)["raftTerm"])
                        break
            else:
                time.sleep(0.005)
        proc.wait(timeout=15)
        self._conns.pop(old, None)
        self.start_member(old)
        wait_until(lambda: self.healthy(old), 30, "the restarted etcd member")
        wait_until(lambda: self._caught_up(old), 30, "the restarted etcd member to catch up")
        time.sleep(0.5)
        return Failover(elected or committed, committed, new_term - old_term)

    def _caught_up(self, m: int) -> bool:
        leader = self.leader()
        ours, theirs = self.status(m), self.status(leader)
        return bool(ours and theirs and int(ours["raftIndex"]) >= int(theirs["raftIndex"]) - 1)


# --- the workloads -----------------------------------------------------------------------

System = Strom | Etcd


def loads(systems: dict[str, System], size: dict[str, Any], got: dict[str, dict]) -> None:
    """The RPC floor, then the append loads, interleaved across the systems (all running,
    the others idle): each rep runs every system once, in a rotating order."""
    names = list(systems)
    for threads in CONCURRENCY:
        print(f"{threads} thread(s), one call at a time each:")
        for name in names:
            floor = run_load(
                systems[name].floor(), threads, 0.3, size["floor_window"], systems[name].pids()
            )
            got[name][("floor", threads)] = floor
            print(f"  {name:28s} RPC floor (no consensus): {floor.describe()}")
        reps: dict[str, list[Load]] = {name: [] for name in names}
        for rep in range(size["reps"]):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                system = systems[name]
                load = run_load(
                    system.appender(), threads, size["warmup"], size["window"], system.pids()
                )
                reps[name].append(load)
                print(f"  {name:28s} append, rep {rep + 1}: {load.describe()}")
        for name in names:
            got[name][("load", threads)] = reps[name]


def failovers(name: str, system: System, size: dict[str, Any], got: dict[str, Any]) -> None:
    for label, sig in (("kill -9", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
        rounds = [system.failover(sig) for _ in range(size["rounds"])]
        elected = statistics.median(r.elected for r in rounds)
        committed = statistics.median(r.committed for r in rounds)
        print(
            f"  {name:28s} after {label}: new leader seen "
            + " ".join(f"{r.elected * 1e3:.0f}" for r in rounds)
            + " ms; first commit "
            + " ".join(f"{r.committed * 1e3:.0f}" for r in rounds)
            + f" ms; {'epoch' if isinstance(system, Strom) else 'term'} +"
            + " +".join(str(r.epochs) for r in rounds)
            + f" -> medians {elected * 1e3:.0f} / {committed * 1e3:.0f} ms"
        )
        got[("failover", label)] = (elected, committed)


def median_load(loads: list[Load]) -> tuple[float, float, float]:
    """Median over the reps of records/s, p50 and p99 (ms)."""
    return (
        statistics.median(x.rate for x in loads),
        statistics.median(pct(x.latencies, 50) for x in loads) * 1e3,
        statistics.median(pct(x.latencies, 99) for x in loads) * 1e3,
    )


def table(got: dict[str, dict[str, Any]], etcd: str | None) -> None:
    ref = got.get(etcd, {}) if etcd else {}
    missing = "etcd not run" if etcd is None else "failed"
    for name, ours in got.items():
        if name == etcd:
            continue
        tag = f" [{name.removeprefix('Strom, ')}]"
        for threads in CONCURRENCY:
            a = median_load(ours[("load", threads)]) if ("load", threads) in ours else None
            b = median_load(ref[("load", threads)]) if ("load", threads) in ref else None
            rows = (
                ("committed records/s", 0, "{:,.0f}/s", ">= 1.0"),
                ("p50 commit latency", 1, "{:.2f} ms", ""),
                ("p99 commit latency", 2, "{:.2f} ms", "<= 2.0"),
            )
            for what, i, fmt, goal in rows:
                report(
                    f"{threads:2d} appender(s): {what}{tag}",
                    fmt.format(a[i]) if a else "failed",
                    fmt.format(b[i]) if b else missing,
                    a[i] / b[i] if a and b else None,
                    goal,
                )
        for label, goal in (("kill -9", "<= 2 s"), ("SIGTERM", "<= 0.3 s")):
            a = ours.get(("failover", label))
            b = ref.get(("failover", label))
            report(
                f"failover after {label}: first commit (leader seen){tag}",
                f"{a[1] * 1e3:.0f} ms ({a[0] * 1e3:.0f})" if a else "failed",
                f"{b[1] * 1e3:.0f} ms ({b[0] * 1e3:.0f})" if b else missing,
                a[1] / b[1] if a and b else None,
                goal,
            )
    for threads in CONCURRENCY:
        for name, ours in got.items():
            if name == etcd:
                continue
            a = ours.get(("floor", threads))
            b = ref.get(("floor", threads))
            report(
                f"{threads:2d} thread(s): RPC floor, calls/s, no consensus "
                f"[{name.removeprefix('Strom, ')}]",
                f"{a.rate:,.0f}/s" if a else "failed",
                f"{b.rate:,.0f}/s" if b else missing,
                a.rate / b.rate if a and b else None,
            )


# --- main --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds per workload")
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    # A SIGTERM (or SIGHUP) unwinds through the finally blocks, which stop every process.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    root = tempfile.mkdtemp(prefix="strom-bench-raft-", dir=os.environ.get("STROM_BENCH_DIR"))
    print(
        f"{'quick' if args.quick else 'full'} run in {root}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; loads: {size['reps']} interleaved reps of "
        f"{size['window']:.0f} s (after {size['warmup']:.1f} s warm-up) per system; "
        f"{size['rounds']} failover rounds of each kind"
    )
    # Each system is built (free ports picked) only once the previous one holds its ports.
    makers: dict[str, Callable[[], System]] = {}
    for i, (config, props) in enumerate(STROM_CONFIGS.items()):
        makers[f"Strom, {config}"] = partial(Strom, os.path.join(root, f"strom{i}"), props)
    etcd = None
    binary = shutil.which("etcd")
    if binary is None:
        print("etcd not found, comparison skipped")
    else:
        version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, check=False
        ).stdout.split("\n")[0]
        etcd = f"etcd ({version.removeprefix('etcd Version: ')})"
        os.makedirs(os.path.join(root, "etcd"))
        makers[etcd] = partial(Etcd, os.path.join(root, "etcd"), binary)
    got: dict[str, dict[str, Any]] = {name: {} for name in makers}
    systems: dict[str, System] = {}
    started: list[System] = []
    try:
        try:
            for name, make in makers.items():
                systems[name] = make()
                started.append(systems[name])
                systems[name].start()
            print(f"started: {', '.join(systems)} (3 nodes each, all on loopback)")
            loads(systems, size, got)
        except Exception as exc:  # a benchmark reports what it has
            print(f"FAILED during the loads: {type(exc).__name__}: {exc}")
        print("failover (default timeouts; one commit, then the signal to the leader):")
        for name, system in systems.items():
            if system in started:
                try:
                    failovers(name, system, size, got[name])
                except Exception as exc:
                    print(f"  {name}: FAILED: {type(exc).__name__}: {exc}")
    finally:
        for system in started:
            try:
                system.stop()
            except Exception as exc:
                print(f"stopping {system.name}: {type(exc).__name__}: {exc}")
        shutil.rmtree(root, ignore_errors=True)
    table(got, etcd)
    head = ("measurement", "Strom", etcd or "etcd", "ratio", "goal")
    widths = [max(len(r[i]) for r in [*ROWS, head]) for i in range(5)]
    print()
    for row in [head, tuple("-" * w for w in widths), *ROWS]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(
        "ratio = Strom / etcd (throughput and RPC floor: higher is better; latency and "
        f"failover: lower is better); loads: medians of {size['reps']} interleaved reps, "
        "latency from the client, one 100-byte record per synchronous call; failover: "
        f"medians of {size['rounds']} rounds"
    )


if __name__ == "__main__":
    main()
