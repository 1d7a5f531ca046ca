"""The replicated data plane end to end, after kafka-producer-perf-test and
kafka-consumer-perf-test: produce and consume throughput, end-to-end latency, unavailability
after kill -9 of a leader, and node memory, against a bare gRPC ceiling in the same run.

    python bench/produce_consume.py [--quick]

Three combined `strom server` nodes on loopback (tests/node_integration/node_cluster.py with
its FAST timeouts: broker session 1.5 s), topics of 3 partitions, RF 3, min.insync.replicas=2,
so each node leads one partition. Records: 1 KiB values, no key, no compression, in batches of
64, 256 and 1,000 records (65 KiB, 258 KiB, 1010 KiB: a 1,024-record batch would exceed the
default max.message.bytes). The client is one grpc.aio event loop (uvloop) kept cheap, as it
shares the 2 cores with the 3 nodes: each ProduceRequest is serialized once and sent as raw
bytes, nothing is varied per record, and no call of the timed loops decodes records.

1. References, before the cluster starts: a bare grpc.aio server in a subprocess of this
   script (raw bytes, no protobuf). Upload as Strom is driven: 3 channels x IN_FLIGHT unary
   calls of one batch each; also 3 bidi streams with IN_FLIGHT messages unacknowledged each;
   the ceiling is the faster of the two. Download: 3 bidi streams, one request at a time,
   each answered with FETCH_BYTES. os.pwrite of the same batches into a file. From the CPU
   seconds per MiB those cost (every process counted), the "RF-3 bound": the CPU a MiB would
   cost if it only crossed gRPC 3 times (client -> leader -> 2 followers) and was written 3
   times, nothing else; acks=all runs print their CPU per MiB against it, a figure that other
   loads on the machine disturb much less than MiB/s.
2. produce: per batch size and acks (1, all), a fresh topic, IN_FLIGHT requests in flight per
   partition leader on one ProduceStream each (the pipelined Produce Strom's producer uses),
   wall time for a fixed volume after a short warm-up; with acks=1 also the
   time until every high watermark reached the end (replicated). CPU share of each process
   in the run, plus "other" (everything else on the machine) and "steal" (the hypervisor):
   a run disturbed by another load shows there. Each topic is deleted after its run.
3. consume: after each acks=all run, 3 FetchStream sessions (one per leader) read the topic
   from offset 0 to its end, FETCH_BYTES per fetch.
4. end-to-end latency (after os.sync(), so no writeback of the runs above overlaps it):
   acks=all produce of 64-record batches at half the acks=all peak of that batch size, open
   loop, on one ProduceStream per leader; the send time (monotonic ns) is stamped into the
   first record's value and the CRC recomputed (8 bytes and one crc32c per send); 3
   long-polling FetchStream consumers (max_wait 500 ms, min_bytes 1) in this process;
   latency = receive time - send time, per batch, after a warm-up. Reference: the bare
   server's unary round trip of the same batch at the same rate.
5. memory against data volume: acks=all 1,000-record batches into one topic in chunks, node
   RSS (/proc/<pid>/status VmRSS) after each chunk.
6. unavailability: acks=all produce of 64-record batches, one at a time per partition every
   20 ms; kill -9 of the leader of a partition (not the active controller); per partition,
   the time from the kill to the first acknowledgement of a produce sent after it, through
   whichever node leads by then (metadata refreshed from a survivor after each error).
7. idle replicas: per count (1,000, then 10,000 replicas per node), a fresh cluster with
   Kafka's default controller and broker timeouts (KAFKA_TIMEOUTS): idle RSS and CPU with
   no topics; acks=all produce of 64-record batches into a 3-partition topic (the run
   "without" them, on this cluster); then 10 topics of 100 (or 1,000) partitions RF 3, the
   time until every node created its logs and every ISR is full, the nodes' idle CPU and
   RSS beside them, and the same produce run into another 3-partition topic beside them.
   `--replicas-only` runs just this step (a few minutes).

Goals (the issue): acks=all produce >= 50% of the ceiling; p99 end to end <= 10 ms at half
load; unavailability <= broker.session.timeout.ms + 1 s; idle node RSS <= 150 MB with 1,000
replicas; acks=all beside 1,000 idle replicas >= 0.8x the run without them; beside 10,000
(10 topics x 1,000 partitions) >= 0.6x, idle node CPU <= 5% and RSS <= 300 MB; RSS does not
grow with data volume (here: at most 10% more after the last chunk than after the first).
Benchmarks print, never assert: a missed goal is printed UNMET.
The full run takes about 3 minutes and writes ~15 GiB (deleted as it goes) under
$STROM_BENCH_DIR (default /tmp); --quick takes about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

# Strom's nodes and tools run gRPC on its posix endpoints (strom_tools/grpc_engine.py); the
# benchmark's own gRPC, its references included, too: set before grpc is first imported.
import strom_tools  # noqa: E402, F401, I001
import grpc  # noqa: E402
import grpc.aio  # noqa: E402
import uvloop  # noqa: E402
from crc32c import crc32c  # noqa: E402

from strom_api.record_batch import CRC_START  # noqa: E402
from strom_api.records import Record, encode_batch  # noqa: E402
from strom_api.tls import ChannelSecurity, aio_channel, sync_channel  # noqa: E402
from strom_api.v1 import client_pb2, client_pb2_grpc, common_pb2, controller_pb2  # noqa: E402
from tests.node_integration.node_cluster import FAST, NodeCluster, wait_until  # noqa: E402

SIZES: dict[str, dict[str, Any]] = {
    "full": dict(
        batches=(64, 256, 1000),
        volume=512 << 20,
        soak=(4, 2 << 30),
        ceiling=1 << 30,
        e2e_warmup=2.0,
        e2e_window=15.0,
        kill_steady=2.0,
        replicas=(1000, 10000),
        idle_volume=96 << 20,
    ),
    "quick": dict(
        batches=(64, 1000),
        volume=96 << 20,
        soak=(3, 384 << 20),
        ceiling=256 << 20,
        e2e_warmup=1.0,
        e2e_window=4.0,
        kill_steady=1.0,
        replicas=(1000, 10000),
        idle_volume=24 << 20,
    ),
}
RECORD = 1024  # bytes per record value
PARTITIONS = 3
IN_FLIGHT = 4  # produce requests in flight per partition leader
FETCH_BYTES = 8 << 20  # max_bytes and partition_max_bytes of each consumer fetch
E2E_BATCH = 64  # records per batch in the latency and failover runs
KILL_INTERVAL = 0.02  # s between produces per partition in the failover run
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
MIB = 1 << 20
OPTIONS = [
    ("grpc.max_receive_message_length", 128 * MIB),
    ("grpc.max_send_message_length", 128 * MIB),
    ("grpc.use_local_subchannel_pool", 1),  # a TCP connection per channel
]
CLK_TCK = os.sysconf("SC_CLK_TCK")
SESSION_TIMEOUT_S = int(FAST["broker.session.timeout.ms"]) / 1000
CEILING = "/strom.bench.Ceiling/"
CPUS = os.cpu_count() or 1

# --- small helpers ---------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def machine_cpu() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


class CpuMeter:
    """CPU share of one core per process over a stretch of wall time ("client": this one;
    "other": every other process and the kernel's own threads, so that a run disturbed by
    something else on the machine shows; "steal": taken by the hypervisor)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.wall = time.perf_counter()
        self.start = {n: cpu_seconds(p) for n, p in pids.items()}
        self.client = time.process_time()
        self.machine = machine_cpu()

    def shares(self) -> dict[str, float]:
        wall = time.perf_counter() - self.wall
        out = {n: (cpu_seconds(p) - self.start[n]) / wall for n, p in self.pids.items()}
        out["client"] = (time.process_time() - self.client) / wall
        busy, steal = machine_cpu()
        ours = sum(out.values())
        out["other"] = max((busy - self.machine[0]) / wall - ours, 0.0)
        out["steal"] = (steal - self.machine[1]) / wall
        return out


def describe_cpu(shares: dict[str, float]) -> str:
    return "CPU " + ", ".join(f"{n} {v:.0%}" for n, v in shares.items())


def cpu_per_mib(shares: dict[str, float], seconds: float, moved: int) -> str:
    """CPU ms per MiB moved, nodes and client together (less sensitive than MiB/s to other
    loads on the machine)."""
    ours = sum(v for n, v in shares.items() if n not in ("other", "steal"))
    return f"{ours * seconds / (moved / MIB) * 1e3:.1f} ms CPU/MiB" if moved else "-"


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def make_batch(records: int, marker: bytes = b"") -> bytes:
    """`records` records of RECORD bytes each (the same value), offsets 0..n-1."""
    now = int(time.time() * 1000)
    value = (marker + os.urandom(RECORD))[:RECORD]
    rest = value if not marker else os.urandom(RECORD)
    return encode_batch([Record(i, now, None, value if i == 0 else rest) for i in range(records)])


def produce_request(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int) -> bytes:
    return client_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ProduceRequest.Partition(partition=partition, records=batch)
                ],
            )
        ],
    ).SerializeToString()


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int) -> Any:
    return client_pb2.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=FETCH_BYTES,
        topics=[
            client_pb2.FetchRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.FetchRequest.Partition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=FETCH_BYTES,
                        current_leader_epoch=-1,
                    )
                ],
            )
        ],
    )


_OFFSET_LENGTH = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
LAST_OFFSET_DELTA_AT = 23  # in a batch: baseOffset, batchLength, epoch, magic, crc, attributes


def batch_positions(data: bytes) -> tuple[list[int], int]:
    """Start of every whole batch in `data`, and the offset after the last."""
    positions = []
    pos, end, nxt = 0, len(data), -1
    while pos + 12 <= end:
        base, length = _OFFSET_LENGTH.unpack_from(data, pos)
        if pos + 12 + length > end:
            break
        positions.append(pos)
        nxt = base + _I32.unpack_from(data, pos + LAST_OFFSET_DELTA_AT)[0] + 1
        pos += 12 + length
    return positions, nxt


def produce_answer(reply: bytes) -> tuple[str | None, int]:
    """(error message or None, base offset) of a one-partition ProduceResponse."""
    item = client_pb2.ProduceResponse.FromString(reply).topics[0].partitions[0]
    if item.error.code != 0:
        return f"{item.error.message or item.error.code}", -1
    return None, item.base_offset


# --- the gRPC ceiling: a bare grpc.aio server in its own process -------------------------------


async def ceiling_server() -> None:
    payloads: dict[int, bytes] = {}

    async def push(request: bytes, context: Any) -> bytes:
        return b"ok"

    async def push_stream(requests: Any, context: Any) -> Any:
        async for _ in requests:
            yield b"ok"

    async def pull_stream(requests: Any, context: Any) -> Any:
        async for request in requests:
            size = int.from_bytes(request, "big")
            if size not in payloads:
                payloads[size] = os.urandom(size)
            yield payloads[size]

    handler = grpc.method_handlers_generic_handler(
        "strom.bench.Ceiling",
        {
            "Push": grpc.unary_unary_rpc_method_handler(push),
            "PushStream": grpc.stream_stream_rpc_method_handler(push_stream),
            "PullStream": grpc.stream_stream_rpc_method_handler(pull_stream),
        },
    )
    server = grpc.aio.server(options=OPTIONS[:2])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


@dataclass
class Transfer:
    mib_s: float
    cpu_per_mib: float  # CPU seconds per MiB moved, of every process involved


def pwrite_reference(directory: str, batch: bytes, volume: int) -> Transfer:
    """os.pwrite of `batch` after `batch` into a new file (page cache, as a log append)."""
    path = os.path.join(directory, "pwrite-reference")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        count = max(volume // len(batch), 1)
        cpu, start = time.process_time(), time.perf_counter()
        for i in range(count):
            os.pwrite(fd, batch, i * len(batch))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        os.close(fd)
        os.unlink(path)
    moved = count * len(batch) / MIB
    return Transfer(moved / elapsed, cpu / moved)


class Ceiling:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--ceiling-server"],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.address = f"127.0.0.1:{int(self.proc.stdout.readline())}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def _cpu(self) -> float:
        return cpu_seconds(self.proc.pid) + time.process_time()

    async def _timed(self, work: Awaitable[None], moved: int) -> Transfer:
        cpu, start = self._cpu(), time.perf_counter()
        await work
        elapsed, cpu = time.perf_counter() - start, self._cpu() - cpu
        return Transfer(moved / elapsed / MIB, cpu / (moved / MIB))

    async def upload_unary(self, batch: bytes, volume: int) -> Transfer:
        """MiB/s of 3 channels x IN_FLIGHT unary calls carrying `batch`."""
        channels = [grpc.aio.insecure_channel(self.address, options=OPTIONS) for _ in range(3)]
        try:
            calls = [c.unary_unary(CEILING + "Push") for c in channels]
            count = max(volume // len(batch) // (3 * IN_FLIGHT), 1)

            async def lane(call: Any, n: int) -> None:
                for _ in range(n):
                    await call(batch)

            await asyncio.gather(*(lane(c, 2) for c in calls for _ in range(IN_FLIGHT)))
            return await self._timed(
                asyncio.gather(*(lane(c, count) for c in calls for _ in range(IN_FLIGHT))),
                count * 3 * IN_FLIGHT * len(batch),
            )
        finally:
            for c in channels:
                await c.close()

    async def upload_stream(self, batch: bytes, volume: int) -> Transfer:
        """MiB/s of 3 bidi streams, each with IN_FLIGHT messages unacknowledged."""
        channels = [grpc.aio.insecure_channel(self.address, options=OPTIONS) for _ in range(3)]
        try:
            count = max(volume // len(batch) // 3, IN_FLIGHT)

            async def stream(channel: Any, n: int) -> None:
                call = channel.stream_stream(CEILING + "PushStream")()
                window = asyncio.Semaphore(IN_FLIGHT)

                async def reader() -> None:
                    for _ in range(n):
                        await call.read()
                        window.release()

                task = asyncio.create_task(reader())
                for _ in range(n):
                    await window.acquire()
                    await call.write(batch)
                await task
                await call.done_writing()

            await asyncio.gather(*(stream(c, IN_FLIGHT * 2) for c in channels))
            return await self._timed(
                asyncio.gather(*(stream(c, count) for c in channels)), count * 3 * len(batch)
            )
        finally:
            for c in channels:
                await c.close()

    async def download(self, volume: int) -> Transfer:
        """MiB/s of 3 bidi streams, one request at a time, each answered with FETCH_BYTES."""
        channels = [grpc.aio.insecure_channel(self.address, options=OPTIONS) for _ in range(3)]
        try:
            count = max(volume // FETCH_BYTES // 3, 2)
            ask = FETCH_BYTES.to_bytes(4, "big")

            async def stream(channel: Any, n: int) -> None:
                call = channel.stream_stream(CEILING + "PullStream")()
                for _ in range(n):
                    await call.write(ask)
                    await call.read()
                await call.done_writing()

            await asyncio.gather(*(stream(c, 1) for c in channels))
            return await self._timed(
                asyncio.gather(*(stream(c, count) for c in channels)), count * 3 * FETCH_BYTES
            )
        finally:
            for c in channels:
                await c.close()

    async def latency(self, batch: bytes, rate: float, warmup: float, window: float) -> list[float]:
        """Round trips (s) of unary calls carrying `batch`, sent at `rate` per second over 3
        channels (as the end-to-end run sends to 3 leaders)."""
        channels = [grpc.aio.insecure_channel(self.address, options=OPTIONS) for _ in range(3)]
        try:
            calls = [c.unary_unary(CEILING + "Push") for c in channels]
            for c in calls:
                await c(batch)
            loop = asyncio.get_running_loop()
            latencies: list[float] = []
            start = loop.time()

            async def one(call: Any, counted: bool) -> None:
                sent = time.monotonic_ns()
                await call(batch)
                if counted:
                    latencies.append((time.monotonic_ns() - sent) / 1e9)

            await paced(
                rate, warmup + window, lambda i: one(calls[i % 3], loop.time() - start >= warmup)
            )
            return latencies
        finally:
            for c in channels:
                await c.close()


async def paced(rate: float, seconds: float, send: Callable[[int], Awaitable[None]]) -> int:
    """Starts send(i) at `rate` per second for `seconds` (open loop: not waiting for the
    previous), then waits for them all; returns how many were started."""
    loop = asyncio.get_running_loop()
    interval = 1 / rate
    start = loop.time()
    tasks: set[asyncio.Task[None]] = set()
    i = 0
    while True:
        due = start + i * interval
        now = loop.time()
        if due >= start + seconds:
            break
        if due > now:
            await asyncio.sleep(due - now)
        task = asyncio.create_task(send(i))  # type: ignore[arg-type]
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        i += 1
    if tasks:
        await asyncio.gather(*tasks)
    return i


# --- the Strom cluster ---------------------------------------------------------------------------


class Strom:
    """The cluster under test and how the benchmark's client dials it: a plaintext
    NodeCluster by default; bench/security.py passes a secured one (its own NodeCluster
    subclass, not started) and the client's security (strom_api.tls: TLS, SASL or both)."""

    def __init__(
        self,
        base: str,
        cluster: NodeCluster | None = None,
        security: ChannelSecurity = None,
    ) -> None:
        self.cluster = NodeCluster(base, 3) if cluster is None else cluster
        self.security = security
        self.cluster.start_all()
        self.cluster.wait_for_brokers(timeout_s=60)
        self.address = {i: f"127.0.0.1:{self.cluster.broker_port[i]}" for i in self.cluster.ids}
        self.channels: dict[int, Any] = {}

    def aio_channel(self, address: str) -> Any:
        """A channel of the benchmark's client to a broker listener."""
        return aio_channel(address, self.security, OPTIONS)

    def pids(self) -> dict[str, int]:
        return {f"node{n}": p.pid for n, p in sorted(self.cluster.procs.items())}

    def rss(self) -> dict[str, float]:
        return {name: rss_mb(pid) for name, pid in self.pids().items()}

    def stop(self) -> None:
        self.cluster.stop_all()

    def create_topics(
        self,
        names: list[str],
        partitions: int = PARTITIONS,
        exist_ok: bool = False,
        timeout_s: float = 120,
    ) -> None:
        """`exist_ok`: a topic that exists already is no error (a CreateTopics of thousands
        of partitions can outlast the 5 s of an attempt, and the next attempt finds them)."""
        request = controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=3,
                    configs=TOPIC_CONFIGS,
                )
                for name in names
            ]
        )
        response = self.cluster.call("CreateTopics", request, timeout_s=timeout_s)
        errors = [
            t.error.message
            for t in response.topics
            if t.error.code != 0
            and not (exist_ok and t.error.code == common_pb2.TOPIC_ALREADY_EXISTS)
        ]
        if errors:
            raise RuntimeError(f"CreateTopics failed: {errors[:3]}")

    def delete_topics(self, names: list[str]) -> None:
        """Deletes them and waits until no node holds their logs (Strom deletes at once, so
        their dirty pages never need writing back)."""
        request = controller_pb2.DeleteTopicsRequest(names=names)
        response = self.cluster.call("DeleteTopics", request, timeout_s=60)
        errors = [t.error.message for t in response.topics if t.error.code != 0]
        if errors:
            raise RuntimeError(f"DeleteTopics failed: {errors[:3]}")

        def gone() -> bool:
            for node in self.cluster.procs:
                held = os.listdir(self.cluster.data_dir(node))
                if any(d.rsplit("-", 1)[0] in names for d in held):
                    return False
            return True

        wait_until(gone, 60, f"the logs of {names} to be deleted")

    def metadata(self, topics: list[str]) -> Any:
        """Metadata from each live broker; the first answer where every broker agrees on
        every partition's leader and each leader is live."""
        answers = []
        for node in self.cluster.procs:
            channel = sync_channel(self.address[node], self.security)
            try:
                stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
                answers.append(stub.Metadata(client_pb2.MetadataRequest(topics=topics), timeout=5))
            except grpc.RpcError:
                return None
            finally:
                channel.close()
        views = [
            {
                (t.name, p.partition): (p.leader_id, p.leader_epoch, len(p.isr))
                for t in a.topics
                for p in t.partitions
            }
            for a in answers
        ]
        first = views[0]
        expected = {(t, p) for t in topics for p in range(len(answers[0].topics[0].partitions))}
        if not expected or set(first) != expected:
            return None
        if any(v != first for v in views[1:]):
            return None
        if any(leader not in self.cluster.procs or isr < 3 for leader, _, isr in first.values()):
            return None
        return first

    def leaders(
        self, topics: list[str], timeout_s: float = 60
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (leader, leader epoch), once every broker knows them and
        every ISR is full."""
        view = wait_until(lambda: self.metadata(topics), timeout_s, f"leaders of {topics}")
        return {k: (v[0], v[1]) for k, v in view.items()}


# --- produce and consume throughput --------------------------------------------------------------


@dataclass
class Run:
    acks: int
    records_per_batch: int
    batch_bytes: int
    bytes: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    leaders_moved: bool = False
    consume_bytes: int = 0
    consume_seconds: float = 0.0
    consume_cpu: dict[str, float] = field(default_factory=dict)
    replicated_seconds: float = 0.0  # acks=1: until every high watermark reached the end
    cpu_seconds: float = 0.0  # the wall time `cpu` covers
    latencies: list[float] = field(default_factory=list)  # s, each timed produce's round trip
    attempts: int = 1  # the idle-replicas runs try again after a failure

    @property
    def mib_s(self) -> float:
        return self.bytes / self.seconds / MIB if self.seconds else float("nan")

    @property
    def records_s(self) -> float:
        batches = self.bytes / self.batch_bytes
        return batches * self.records_per_batch / self.seconds if self.seconds else float("nan")

    @property
    def consume_mib_s(self) -> float:
        return self.consume_bytes / self.consume_seconds / MIB if self.consume_seconds else 0.0


async def produce_run(
    strom: Strom,
    topic: str,
    leaders: dict[int, int],
    batch: bytes,
    acks: int,
    volume: int,
    run: Run,
) -> None:
    """IN_FLIGHT produce requests in flight per partition, `volume` bytes in all, on one
    ProduceStream per partition leader (as Strom's producer sends them)."""
    channels = {p: strom.aio_channel(strom.address[b]) for p, b in leaders.items()}
    try:
        requests = {p: produce_request(topic, p, batch, acks, 30_000) for p in channels}
        per_lane = max(volume // len(batch) // len(channels), IN_FLIGHT)
        ends = dict.fromkeys(channels, 0)

        async def lane(p: int, n: int, timed: bool) -> None:
            call = channels[p].stream_stream(
                "/strom_api.v1.ClientService/ProduceStream", response_deserializer=lambda b: b
            )()
            window = asyncio.Semaphore(IN_FLIGHT)
            sent: collections.deque[float] = collections.deque()

            async def answers() -> None:
                for _ in range(n):
                    error, base = produce_answer(await call.read())
                    latency = time.perf_counter() - sent.popleft()
                    if timed:
                        run.latencies.append(latency)
                    if error is not None:
                        run.errors.append(error)
                        raise RuntimeError(error)
                    ends[p] = max(ends[p], base + run.records_per_batch)
                    window.release()

            reader = asyncio.create_task(answers())
            try:
                for _ in range(n):
                    await window.acquire()
                    sent.append(time.perf_counter())
                    await call.write(requests[p])
                await reader
                await call.done_writing()
            finally:
                reader.cancel()
                call.cancel()

        await asyncio.gather(*(lane(p, IN_FLIGHT, False) for p in channels))
        meter = CpuMeter(strom.pids())
        start = time.perf_counter()
        await asyncio.gather(*(lane(p, per_lane, True) for p in channels))
        run.seconds = time.perf_counter() - start
        run.bytes = per_lane * len(channels) * len(batch)
        while acks != -1:  # until the followers have it all (the high watermarks)
            marks = [await high_watermark(channels[p], topic, p) for p in channels]
            if all(m >= ends[p] for m, p in zip(marks, channels, strict=True)):
                run.replicated_seconds = time.perf_counter() - start
                break
            if time.perf_counter() - start > 300:
                raise TimeoutError("the followers did not catch up within 300 s")
            await asyncio.sleep(0.005)
        run.cpu = meter.shares()  # with acks=1, until the followers had it all
        run.cpu_seconds = time.perf_counter() - start
    finally:
        for c in channels.values():
            await c.close()


async def high_watermark(channel: Any, topic: str, partition: int) -> int:
    stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
    request = client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ListOffsetsRequest.Partition(partition=partition, timestamp=-1)
                ],
            )
        ]
    )
    answer = (await stub.ListOffsets(request, timeout=10)).topics[0].partitions[0]
    if answer.error.code != 0:
        raise RuntimeError(f"ListOffsets of {topic}-{partition}: {answer.error.message}")
    return int(answer.offset)


async def consume_run(strom: Strom, topic: str, leaders: dict[int, int], run: Run) -> None:
    """Reads every partition from 0 to its end: one FetchStream per leader."""
    channels = {p: strom.aio_channel(strom.address[b]) for p, b in leaders.items()}
    try:
        ends = {p: await high_watermark(c, topic, p) for p, c in channels.items()}
        total = 0

        async def session(p: int) -> None:
            nonlocal total
            stub = client_pb2_grpc.ClientServiceStub(channels[p])  # type: ignore[no-untyped-call]
            call = stub.FetchStream()
            offset = 0
            while offset < ends[p]:
                await call.write(fetch_request(topic, p, offset, 500))
                response = await call.read()
                item = response.topics[0].partitions[0]
                if item.error.code != 0:
                    raise RuntimeError(f"fetch of {topic}-{p}: {item.error.message}")
                _, nxt = batch_positions(item.records)
                if nxt <= offset:
                    raise RuntimeError(f"fetch of {topic}-{p} at {offset} made no progress")
                total += len(item.records)
                offset = nxt
            await call.done_writing()

        meter = CpuMeter(strom.pids())
        start = time.perf_counter()
        await asyncio.gather(*(session(p) for p in channels))
        run.consume_seconds = time.perf_counter() - start
        run.consume_cpu = meter.shares()
        run.consume_bytes = total
    finally:
        for c in channels.values():
            await c.close()


def throughput(strom: Strom, runner: asyncio.Runner, size: dict[str, Any]) -> list[Run]:
    runs = []
    for records in size["batches"]:
        batch = make_batch(records)
        for acks in (1, -1):
            topic = f"perf-{'all' if acks == -1 else 'one'}-{records}"
            strom.create_topics([topic])
            before = strom.leaders([topic])
            leaders = {p: b for (_, p), (b, _) in before.items()}
            run = Run(acks, records, len(batch))
            try:
                runner.run(produce_run(strom, topic, leaders, batch, acks, size["volume"], run))
                if acks == -1:
                    runner.run(consume_run(strom, topic, leaders, run))
            except Exception as exc:
                if not run.errors:
                    run.errors.append(f"{type(exc).__name__}: {exc}")
            after = strom.leaders([topic])
            run.leaders_moved = after != before
            runs.append(run)
            strom.delete_topics([topic])
            print(
                f"  produce acks={'all' if acks == -1 else acks}, {records} records "
                f"({len(batch) / 1024:.0f} KiB) per batch: {run.bytes / MIB:.0f} MiB in "
                f"{run.seconds:.2f} s = {run.mib_s:.1f} MiB/s, {run.records_s:,.0f} records/s; "
                f"{cpu_per_mib(run.cpu, run.cpu_seconds, run.bytes)}; {describe_cpu(run.cpu)}"
            )
            if acks == -1 and run.consume_seconds:
                print(
                    f"  consume it: {run.consume_bytes / MIB:.0f} MiB in "
                    f"{run.consume_seconds:.2f} s = {run.consume_mib_s:.1f} MiB/s; "
                    f"{cpu_per_mib(run.consume_cpu, run.consume_seconds, run.consume_bytes)}; "
                    f"{describe_cpu(run.consume_cpu)}"
                )
            if run.replicated_seconds:
                print(
                    f"    every high watermark at the end after {run.replicated_seconds:.2f} s: "
                    f"{run.bytes / run.replicated_seconds / MIB:.1f} MiB/s replicated"
                )
            if run.errors:
                print(f"    FAILED: {run.errors[0]}")
            if run.leaders_moved:
                print(f"    leaders moved during the run: {before} -> {after}")
    return runs


def soak(strom: Strom, runner: asyncio.Runner, chunks: int, volume: int) -> list[Any]:
    """RSS against data volume: acks=all 1,000-record batches into one topic, `chunks`
    times volume/chunks; (MiB so far, RSS per node) after each."""
    topic = "soak"
    strom.create_topics([topic])
    leaders = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
    batch = make_batch(1000)
    points = []
    total = 0
    for _ in range(chunks):
        run = Run(-1, 1000, len(batch))
        runner.run(produce_run(strom, topic, leaders, batch, -1, volume // chunks, run))
        total += run.bytes
        time.sleep(1.0)
        points.append((total / MIB, strom.rss()))
        print(
            f"  after {total / MIB:,.0f} MiB ({run.mib_s:.0f} MiB/s): RSS {fmt_rss(points[-1][1])}"
        )
    first, last = points[0][1], points[-1][1]
    growth = (sum(last.values()) - sum(first.values())) / len(first)
    print(
        f"  mean RSS growth from the first chunk to the last: {growth:+.1f} MB over "
        f"{(points[-1][0] - points[0][0]) / 1024:.2f} GiB"
    )
    strom.delete_topics([topic])
    return points


# --- end-to-end latency --------------------------------------------------------------------------

MARKER = b"\xa5TSMARK\x5a"


@dataclass
class Latency:
    rate: float  # batches/s
    latencies: list[float] = field(default_factory=list)  # s, end to end
    acks: list[float] = field(default_factory=list)  # s, produce send -> ack
    sent: int = 0
    received: int = 0
    errors: list[str] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)


class PipelinedProduce:
    """Requests written in order on one ProduceStream, each answer handed to the oldest
    unanswered request (the broker answers in order): the open-loop sender's lane."""

    def __init__(self, channel: Any) -> None:
        self.call = channel.stream_stream(
            "/strom_api.v1.ClientService/ProduceStream", response_deserializer=lambda b: b
        )()
        self.unanswered: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self.writing = asyncio.Lock()  # FIFO: writes keep the order of `unanswered`
        self.reader = asyncio.create_task(self._read())

    async def send(self, request: bytes) -> bytes:
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.unanswered.append(answer)
        async with self.writing:
            await self.call.write(request)
        return await answer

    async def _read(self) -> None:
        try:
            while (response := await self.call.read()) is not grpc.aio.EOF:
                self.unanswered.popleft().set_result(response)
        except grpc.aio.AioRpcError as exc:
            for answer in self.unanswered:
                answer.set_exception(exc)

    def close(self) -> None:
        self.reader.cancel()
        self.call.cancel()


async def end_to_end(
    strom: Strom, topic: str, leaders: dict[int, int], rate: float, warmup: float, window: float
) -> Latency:
    batch = make_batch(E2E_BATCH, MARKER)
    value_at = batch.index(MARKER)
    result = Latency(rate)
    channels = {p: strom.aio_channel(strom.address[b]) for p, b in leaders.items()}
    loop = asyncio.get_running_loop()
    try:
        templates = {}
        for p, c in channels.items():
            request = produce_request(topic, p, batch, -1, 30_000)
            templates[p] = (PipelinedProduce(c), request, request.index(batch))
        begin = time.monotonic_ns()
        counted_from = begin + int(warmup * 1e9)
        counted_to = begin + int((warmup + window) * 1e9)
        stop = asyncio.Event()

        async def consumer(p: int) -> None:
            stub = client_pb2_grpc.ClientServiceStub(channels[p])  # type: ignore[no-untyped-call]
            call = stub.FetchStream()
            offset = 0
            while not stop.is_set():
                await call.write(fetch_request(topic, p, offset, 500))
                response = await call.read()
                now = time.monotonic_ns()
                item = response.topics[0].partitions[0]
                if item.error.code != 0:
                    result.errors.append(f"fetch: {item.error.message}")
                    await asyncio.sleep(0.05)
                    continue
                data = item.records
                positions, nxt = batch_positions(data)
                for pos in positions:
                    sent = _I64.unpack_from(data, pos + value_at)[0]
                    result.received += 1
                    if counted_from <= sent < counted_to:
                        result.latencies.append((now - sent) / 1e9)
                if positions:
                    offset = nxt
            call.cancel()

        async def send(i: int) -> None:
            call, template, at = templates[i % len(templates)]
            request = bytearray(template)
            sent = time.monotonic_ns()
            _I64.pack_into(request, at + value_at, sent)
            crc = crc32c(memoryview(request)[at + CRC_START : at + len(batch)])
            struct.pack_into(">I", request, at + CRC_START - 4, crc)
            try:
                error, _ = produce_answer(await call.send(bytes(request)))
            except grpc.aio.AioRpcError as exc:
                error = f"{exc.code().name}: {exc.details()}"
            if error is not None:
                result.errors.append(error)
            elif counted_from <= sent < counted_to:
                result.acks.append((time.monotonic_ns() - sent) / 1e9)

        consumers = [asyncio.create_task(consumer(p)) for p in channels]
        await asyncio.sleep(0.3)  # the consumers' first (empty) long polls are out
        meter = CpuMeter(strom.pids())
        result.sent = await paced(rate, warmup + window, send)
        result.cpu = meter.shares()
        deadline = loop.time() + 10
        while result.received < result.sent and loop.time() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        for call, _, _ in templates.values():
            call.close()
        return result
    finally:
        for c in channels.values():
            await c.close()


# --- unavailability after kill -9 ---------------------------------------------------------------


async def failover(
    strom: Strom, topic: str, leaders: dict[int, int], steady: float
) -> dict[str, Any]:
    """kill -9 of one partition's leader while producing; per partition, seconds from the
    kill to the first acknowledgement of a produce sent after it."""
    cluster = strom.cluster
    controller = cluster.active_controller()
    victim_partition = next(p for p, b in sorted(leaders.items()) if b != controller)
    victim = leaders[victim_partition]
    batch = make_batch(E2E_BATCH)
    channels = {b: strom.aio_channel(a) for b, a in strom.address.items()}
    calls = {
        b: c.unary_unary("/strom_api.v1.ClientService/Produce", response_deserializer=lambda x: x)
        for b, c in channels.items()
    }
    requests = {p: produce_request(topic, p, batch, -1, 10_000) for p in leaders}
    kill_at: list[int] = []
    first_ack: dict[int, int] = {}
    current = dict(leaders)
    log: dict[int, list[str]] = {p: [] for p in leaders}

    async def refresh(p: int) -> None:
        for b in [b for b in cluster.procs if b != victim or not kill_at]:
            stub = client_pb2_grpc.ClientServiceStub(channels[b])  # type: ignore[no-untyped-call]
            try:
                meta = await stub.Metadata(client_pb2.MetadataRequest(topics=[topic]), timeout=1)
            except grpc.aio.AioRpcError:
                continue
            leader = meta.topics[0].partitions[p].leader_id
            if leader >= 0:
                current[p] = leader
            return

    async def producer(p: int) -> None:
        deadline = None
        while True:
            if kill_at and deadline is None:
                deadline = kill_at[0] + 60 * 10**9
            if deadline is not None and (p in first_ack or time.monotonic_ns() > deadline):
                return
            sent = time.monotonic_ns()
            try:
                error, _ = produce_answer(await calls[current[p]](requests[p], timeout=15))
            except grpc.aio.AioRpcError as exc:
                error = f"{exc.code().name}"
            if error is None:
                if kill_at and sent >= kill_at[0] and p not in first_ack:
                    first_ack[p] = time.monotonic_ns()
                await asyncio.sleep(KILL_INTERVAL)
            else:
                if kill_at and (not log[p] or log[p][-1] != error):
                    log[p].append(error)
                await refresh(p)
                await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(producer(p)) for p in leaders]
    try:
        await asyncio.sleep(steady)
        kill_at.append(time.monotonic_ns())
        cluster.procs[victim].send_signal(signal.SIGKILL)
        await asyncio.wait_for(asyncio.gather(*tasks), 90)
    finally:
        for t in tasks:
            t.cancel()
        for c in channels.values():
            await c.close()
    cluster.procs.pop(victim).wait(timeout=10)
    return {
        "victim": victim,
        "victim_partition": victim_partition,
        "controller": controller,
        "seconds": {
            p: (first_ack[p] - kill_at[0]) / 1e9 if p in first_ack else None for p in leaders
        },
        "errors": log,
    }


# --- idle replicas ------------------------------------------------------------------------------

IDLE_TOPICS = 10
# The idle step runs with Kafka's default controller and broker timeouts, not FAST's: what it
# measures is what idle replicas cost a cluster as users run it, and FAST's broker heartbeat
# every 200 ms (Kafka: 2 s) alone kept the active controller's node at 5-6% of a core with
# no topics at all.
KAFKA_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.append.linger.ms": "25",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}
# Goals per replica count (the issue): throughput beside them / without, idle RSS MB,
# idle CPU of a node (share of one core).
IDLE_GOALS: dict[int, tuple[float, float | None, float | None]] = {
    1000: (0.8, 150.0, None),
    10000: (0.6, 300.0, 0.05),
}


def idle_produce(strom: Strom, runner: asyncio.Runner, topic: str, volume: int) -> Run:
    """acks=all produce of 64-record batches into a fresh 3-partition topic. A run that
    fails (a leader moved: with thousands of replicas a busy node can miss its broker
    session) is tried again, up to 3 times, with the leaders as they are then; the run
    says how many tries it took."""
    batch = make_batch(E2E_BATCH)
    for attempt in range(1, 4):
        run = Run(-1, E2E_BATCH, len(batch))
        run.attempts = attempt
        try:
            strom.create_topics([topic], exist_ok=True)
            leaders = {p: b for (_, p), (b, _) in strom.leaders([topic], 120).items()}
            runner.run(produce_run(strom, topic, leaders, batch, -1, volume, run))
        except Exception as exc:
            if not run.errors:
                run.errors.append(f"{type(exc).__name__}: {exc}")
        if not run.errors:
            break
    return run


def idle_replicas(base: str, replicas: int, runner: asyncio.Runner, volume: int) -> dict[str, Any]:
    """On a fresh cluster: idle RSS with no topics, the acks=all run without idle replicas,
    then `replicas` replicas per node (IDLE_TOPICS topics, RF 3 on the 3 nodes): the time
    until they exist with full ISRs, idle CPU and RSS, and the acks=all run beside them."""
    # Less beside 10,000 (at least 12 MiB; the same without): the ratio is of MiB/s, and
    # a slow run beside them should not take the bench's minutes.
    volume = max(volume * 1000 // replicas, min(volume, 12 << 20))
    strom = Strom(base, NodeCluster(base, 3, extra=KAFKA_TIMEOUTS))
    try:
        time.sleep(3.0)
        empty = strom.rss()
        meter = CpuMeter(strom.pids())
        time.sleep(10.0)
        empty_cpu = meter.shares()
        alone = idle_produce(strom, runner, "without-idle", volume)
        names = [f"idle-{t}" for t in range(IDLE_TOPICS)]
        per_topic = replicas // IDLE_TOPICS
        # 1,000 replicas take seconds; 10,000 on this 2-core machine up to minutes.
        patience = max(120.0, replicas / 30)
        start = time.perf_counter()
        for attempt in range(5):  # a broker fenced meanwhile (2 cores): again
            strom.cluster.wait_for_brokers(timeout_s=patience)
            try:
                strom.create_topics(names, per_topic, exist_ok=True, timeout_s=patience)
                break
            except RuntimeError:
                if attempt == 4:
                    raise
        created = time.perf_counter() - start

        def logs_created() -> bool:
            return all(
                sum(1 for d in os.listdir(strom.cluster.data_dir(n)) if d.startswith("idle-"))
                == IDLE_TOPICS * per_topic
                for n in strom.cluster.ids
            )

        logs = ready = None  # None: not within `patience` (measured on all the same)
        with contextlib.suppress(TimeoutError):
            wait_until(logs_created, patience, f"every node to create its {replicas:,} replicas")
            logs = time.perf_counter() - start
            wait_until(lambda: strom.metadata(names), patience, "leaders and full ISRs everywhere")
            ready = time.perf_counter() - start
        time.sleep(5.0)
        meter = CpuMeter(strom.pids())
        time.sleep(10.0)
        cpu = meter.shares()
        cpu.pop("client", None)
        loaded = strom.rss()
        run = idle_produce(strom, runner, "beside-idle", volume)
        return {
            "empty": empty,
            "empty_cpu": empty_cpu,
            "loaded": loaded,
            "replicas": IDLE_TOPICS * per_topic,
            "created": created,
            "logs": logs,
            "ready": ready,
            "patience": patience,
            "cpu": cpu,
            "alone": alone,
            "run": run,
        }
    finally:
        strom.stop()


def print_idle(mem: dict[str, Any]) -> None:
    def after(seconds: float | None) -> str:
        return f"{seconds:.1f} s" if seconds is not None else f"not within {mem['patience']:.0f} s"

    print(
        f"  idle RSS, no topics: {fmt_rss(mem['empty'])}; with {mem['replicas']:,} replicas "
        f"per node (CreateTopics answered in {mem['created']:.1f} s, every log after "
        f"{after(mem['logs'])}, every ISR full after {after(mem['ready'])}): "
        f"{fmt_rss(mem['loaded'])}; idle {describe_cpu(mem['cpu'])} (no topics: "
        f"{describe_cpu(mem['empty_cpu'])})"
    )
    for label, run in (("without them", mem["alone"]), ("beside them", mem["run"])):
        tries = f" (try {run.attempts} of 3)" if run.attempts > 1 else ""
        print(
            f"  produce acks=all, {E2E_BATCH} records per batch, into a 3-partition topic "
            f"{label}{tries}: {run.bytes / MIB:.0f} MiB in {run.seconds:.2f} s = "
            f"{run.mib_s:.1f} MiB/s, {cpu_per_mib(run.cpu, run.cpu_seconds, run.bytes)}; "
            f"{describe_cpu(run.cpu)}" + (f"; FAILED: {run.errors[0]}" if run.errors else "")
        )


def run_idle_replicas(root: str, size: dict[str, Any], runner: asyncio.Runner) -> list[Any]:
    found: list[Any] = []
    for replicas in size["replicas"]:
        print(f"{replicas:,} idle replicas per node (fresh cluster):")
        try:
            mem = idle_replicas(
                os.path.join(root, f"replicas-{replicas}"), replicas, runner, size["idle_volume"]
            )
        except Exception as exc:  # the other counts still run
            print(f"  FAILED: {type(exc).__name__}: {exc}")
            continue
        print_idle(mem)
        found.append(mem)
    return found


# --- the report ----------------------------------------------------------------------------------

ROWS: list[tuple[str, str, str, str, str, str]] = []


def row(
    what: str, ours: str, ref: str, ratio: float | None, goal: str = "", met: bool | None = None
) -> None:
    verdict = "" if met is None else ("met" if met else "UNMET")
    ROWS.append((what, ours, ref, "" if ratio is None else f"{ratio:.2f}", goal, verdict))


def print_table() -> None:
    head = ("measurement", "Strom", "reference", "ratio", "goal", "")
    widths = [max(len(r[i]) for r in [*ROWS, head]) for i in range(6)]
    print()
    for r in [head, tuple("-" * w for w in widths), *ROWS]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small volumes, under 90 s")
    parser.add_argument(
        "--replicas-only",
        action="store_true",
        help="only step 7: 1,000 and 10,000 idle replicas per node (a few minutes)",
    )
    parser.add_argument("--ceiling-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ceiling_server:
        uvloop.run(ceiling_server())
        return 0
    mode = "quick" if args.quick else "full"
    size = SIZES[mode]
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    root = tempfile.mkdtemp(prefix="strom-bench-pc-", dir=os.environ.get("STROM_BENCH_DIR"))
    if args.replicas_only:
        print(
            f"idle replicas only ({mode}) in {root}, Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} CPUs; 3 combined nodes, load average "
            f"{os.getloadavg()[0]:.1f}; acks=all runs of {size['idle_volume'] >> 20} MiB "
            f"(12 beside 10,000) in {E2E_BATCH}-record batches, {IN_FLIGHT} in flight per leader"
        )
        return replicas_only(root, size)
    print(
        f"{mode} run in {root}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"3 combined nodes, {PARTITIONS} partitions RF 3 (min.insync.replicas=2), "
        f"{RECORD} B records, {IN_FLIGHT} produce requests in flight per leader, "
        f"{size['volume'] >> 20} MiB per produce run, {FETCH_BYTES >> 20} MiB fetches"
    )
    wall = time.perf_counter()
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    ceiling = Ceiling()
    strom: Strom | None = None
    batches = {r: make_batch(r) for r in size["batches"]}
    # records per batch -> (ceiling MiB/s, CPU s per MiB of the RF-3 bound)
    up: dict[int, tuple[float, float]] = {}
    down = None
    got: dict[str, Any] = {}
    try:
        print("gRPC ceiling (a bare grpc.aio server process, raw bytes), and os.pwrite:")
        for records, batch in batches.items():
            unary = runner.run(ceiling.upload_unary(batch, size["ceiling"]))
            stream = runner.run(ceiling.upload_stream(batch, size["ceiling"]))
            disk = pwrite_reference(root, batch, size["ceiling"])
            transfer = min(unary.cpu_per_mib, stream.cpu_per_mib)
            bound = CPUS / (3 * transfer + 3 * disk.cpu_per_mib)
            up[records] = (max(unary.mib_s, stream.mib_s), CPUS / bound)
            print(
                f"  {len(batch) / 1024:.0f} KiB messages: unary x{3 * IN_FLIGHT} in flight "
                f"{unary.mib_s:.1f} MiB/s ({unary.cpu_per_mib * 1e3:.2f} ms CPU/MiB), 3 bidi "
                f"streams x{IN_FLIGHT} {stream.mib_s:.1f} MiB/s "
                f"({stream.cpu_per_mib * 1e3:.2f} ms CPU/MiB); pwrite {disk.mib_s:.0f} MiB/s "
                f"({disk.cpu_per_mib * 1e3:.2f} ms CPU/MiB) -> RF-3 bound on {CPUS} CPUs "
                f"(3 transfers + 3 writes of each byte, nothing else): {bound:.0f} MiB/s"
            )
        down_t = runner.run(ceiling.download(size["ceiling"]))
        down = down_t.mib_s
        print(
            f"  download, 3 bidi streams, {FETCH_BYTES >> 20} MiB replies: {down:.1f} MiB/s "
            f"({down_t.cpu_per_mib * 1e3:.2f} ms CPU/MiB)"
        )

        strom = Strom(os.path.join(root, "cluster"))
        time.sleep(1.0)
        print(f"cluster up; idle RSS {fmt_rss(strom.rss())}")
        runs = throughput(strom, runner, size)
        got["runs"] = runs
        print(f"  RSS after the throughput runs: {fmt_rss(strom.rss())}")
        os.sync()  # no writeback of the runs above during the latency run

        peak_run = next(
            (r for r in runs if r.acks == -1 and r.records_per_batch == E2E_BATCH), None
        )
        if peak_run and peak_run.seconds and not peak_run.errors:
            rate = peak_run.bytes / peak_run.batch_bytes / peak_run.seconds / 2
            topic = "e2e"
            strom.create_topics([topic])
            leaders = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
            lat = runner.run(
                end_to_end(strom, topic, leaders, rate, size["e2e_warmup"], size["e2e_window"])
            )
            got["e2e"] = lat
            e2e_batch = make_batch(E2E_BATCH)
            ref = runner.run(
                ceiling.latency(e2e_batch, rate, size["e2e_warmup"], size["e2e_window"])
            )
            got["e2e_ref"] = ref
            print(
                f"  end to end at {rate:,.0f} batches/s ({rate * E2E_BATCH:,.0f} records/s, "
                f"{rate * len(e2e_batch) / MIB:.1f} MiB/s, half the acks=all peak): sent "
                f"{lat.sent}, received {lat.received}, {len(lat.errors)} errors; p50/p99/p99.9 "
                f"{ms(pct(lat.latencies, 50))}/{ms(pct(lat.latencies, 99))}/"
                f"{ms(pct(lat.latencies, 99.9))} ms; produce acks p50/p99 "
                f"{ms(pct(lat.acks, 50))}/{ms(pct(lat.acks, 99))} ms; {describe_cpu(lat.cpu)}"
            )
            print(
                f"  gRPC reference, unary round trips at the same rate: p50/p99/p99.9 "
                f"{ms(pct(ref, 50))}/{ms(pct(ref, 99))}/{ms(pct(ref, 99.9))} ms"
            )
            if lat.errors:
                print(f"    first error: {lat.errors[0]}")
        else:
            print("  end to end skipped: no acks=all run with 64-record batches succeeded")

        print("RSS against data volume (acks=all, 1,000-record batches, one topic):")
        got["soak"] = soak(strom, runner, *size["soak"])

        topic = "failover"
        strom.create_topics([topic])
        leaders = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
        fo = runner.run(failover(strom, topic, leaders, size["kill_steady"]))
        got["failover"] = fo
        print(
            f"  kill -9 of node {fo['victim']} (leader of {topic}-{fo['victim_partition']}; "
            f"active controller: node {fo['controller']}): first ack after the kill per "
            "partition: "
            + ", ".join(
                f"{p}: {'none' if s is None else f'{s:.2f} s'}"
                for p, s in sorted(fo["seconds"].items())
            )
        )
        for p, errors in sorted(fo["errors"].items()):
            if errors:
                print(f"    partition {p} saw: {' -> '.join(e[:70] for e in errors[:6])}")
        strom.stop()
        strom = None

        got["memory"] = run_idle_replicas(root, size, runner)
    except Exception as exc:  # a benchmark reports what it has
        print(f"FAILED: {type(exc).__name__}: {exc}")
    finally:
        if strom is not None:
            strom.stop()
        ceiling.stop()
        runner.close()
        shutil.rmtree(root, ignore_errors=True)
    report(got, up, down)
    print_table()
    print(
        f"ratios: throughput / the gRPC ceiling of the same shape, and the RF-3 bound's CPU per "
        f"MiB / Strom's (higher is better); latency and RSS / the reference (lower is better); "
        f"unavailability / broker.session.timeout.ms ({SESSION_TIMEOUT_S:.1f} s). Wall time "
        f"{time.perf_counter() - wall:.0f} s."
    )
    return 0


def replicas_only(root: str, size: dict[str, Any]) -> int:
    """Step 7 alone (--replicas-only)."""
    wall = time.perf_counter()
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    got: dict[str, Any] = {}
    try:
        got["memory"] = run_idle_replicas(root, size, runner)
    except Exception as exc:  # a benchmark reports what it has
        print(f"FAILED: {type(exc).__name__}: {exc}")
    finally:
        runner.close()
        shutil.rmtree(root, ignore_errors=True)
    report(got, {}, None)
    print_table()
    print(
        "ratios: throughput beside the idle replicas / the same run on the same cluster "
        "before they were created (higher is better); RSS / with no topics (lower is better). "
        f"Wall time {time.perf_counter() - wall:.0f} s."
    )
    return 0


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def fmt_rss(rss: dict[str, float]) -> str:
    return ", ".join(f"{n} {v:.0f} MB" for n, v in rss.items())


def report(got: dict[str, Any], up: dict[int, tuple[float, float]], down: float | None) -> None:
    for run in got.get("runs", []):
        ceiling, bound = up[run.records_per_batch]
        acks = "all" if run.acks == -1 else "1"
        label = f"produce acks={acks}, {run.batch_bytes / 1024:.0f} KiB batches"
        failed = bool(run.errors) or not run.seconds
        ratio = None if failed else run.mib_s / ceiling
        row(
            f"{label}: MiB/s (records/s)",
            "failed" if failed else f"{run.mib_s:.1f} ({run.records_s:,.0f}/s)",
            f"{ceiling:.1f}",
            ratio,
            ">= 0.50" if run.acks == -1 else "",
            (ratio is not None and ratio >= 0.5) if run.acks == -1 else None,
        )
        if failed:
            continue
        if run.acks == 1 and run.replicated_seconds:
            mib_s = run.bytes / run.replicated_seconds / MIB
            row(
                "  until replicated (high watermark at the end)",
                f"{mib_s:.1f}",
                f"{ceiling:.1f}",
                mib_s / ceiling,
            )
        if run.acks == -1 and run.cpu_seconds:
            ours = sum(v for n, v in run.cpu.items() if n not in ("other", "steal"))
            cost = ours * run.cpu_seconds / (run.bytes / MIB)
            row(
                "  CPU per MiB, all processes: RF-3 bound / Strom",
                f"{cost * 1e3:.1f} ms",
                f"{bound * 1e3:.1f} ms",
                bound / cost,
            )
    for run in got.get("runs", []):
        if run.acks == -1 and down:
            row(
                f"consume from 0, {run.batch_bytes / 1024:.0f} KiB batches: MiB/s",
                f"{run.consume_mib_s:.1f}" if run.consume_seconds else "failed",
                f"{down:.1f}",
                run.consume_mib_s / down if run.consume_seconds else None,
            )
    lat, ref = got.get("e2e"), got.get("e2e_ref")
    if lat is not None and ref:
        for q, goal in ((50, ""), (99, "<= 10 ms"), (99.9, "")):
            ours, theirs = pct(lat.latencies, q), pct(ref, q)
            row(
                f"end to end p{q:g} at half load ({lat.rate * E2E_BATCH:,.0f} records/s)",
                f"{ms(ours)} ms",
                f"{ms(theirs)} ms",
                ours / theirs,
                goal,
                ours <= 0.010 if goal else None,
            )
    fo = got.get("failover")
    if fo:
        seconds = fo["seconds"]
        ours = seconds[fo["victim_partition"]]
        others = [s for p, s in seconds.items() if p != fo["victim_partition"]]
        limit = SESSION_TIMEOUT_S + 1
        row(
            "unavailability after kill -9 of its leader",
            "none" if ours is None else f"{ours:.2f} s",
            f"{SESSION_TIMEOUT_S:.2f} s",
            None if ours is None else ours / SESSION_TIMEOUT_S,
            f"<= {limit:.1f} s",
            ours is not None and ours <= limit,
        )
        worst = None if any(s is None for s in others) else max(others, default=0.0)
        row(
            "  the other partitions (their follower killed)",
            "none" if worst is None else f"{worst:.2f} s",
            f"{SESSION_TIMEOUT_S:.2f} s",
            None if worst is None else worst / SESSION_TIMEOUT_S,
            f"<= {limit:.1f} s",
            worst is not None and worst <= limit,
        )
    points = got.get("soak")
    if points and len(points) > 1:
        (v0, first), (v1, last) = points[0], points[-1]
        a, b = sum(first.values()) / len(first), sum(last.values()) / len(last)
        row(
            f"node RSS after {v1:,.0f} MiB into one topic (mean of 3)",
            f"{b:.0f} MB",
            f"{a:.0f} MB after {v0:,.0f} MiB",
            b / a,
            "<= 1.10",
            b <= a * 1.1,
        )
    for mem in got.get("memory", []):
        report_idle(mem)


def report_idle(mem: dict[str, Any]) -> None:
    """The rows of one idle-replicas cluster (step 7): throughput against the same run on
    that cluster before the idle replicas existed, idle RSS and CPU."""
    speed, rss_goal, cpu_goal = IDLE_GOALS.get(mem["replicas"], (None, None, None))
    run, alone = mem["run"], mem["alone"]
    ok = bool(run.seconds) and not run.errors
    ok_alone = bool(alone.seconds) and not alone.errors
    ratio = run.mib_s / alone.mib_s if ok and ok_alone else None
    row(
        f"produce acks=all, {run.batch_bytes / 1024:.0f} KiB, beside "
        f"{mem['replicas']:,} idle replicas per node: MiB/s",
        f"{run.mib_s:.1f}" if ok else "failed",
        f"{alone.mib_s:.1f} without" if ok_alone else "failed without",
        ratio,
        "" if speed is None else f">= {speed:.2f}",
        None if speed is None else (ratio is not None and ratio >= speed),
    )
    loaded, empty = max(mem["loaded"].values()), max(mem["empty"].values())
    row(
        f"idle node RSS with {mem['replicas']:,} replicas (max of 3)",
        f"{loaded:.0f} MB",
        f"{empty:.0f} MB, no topics",
        loaded / empty,
        "" if rss_goal is None else f"<= {rss_goal:.0f} MB",
        None if rss_goal is None else loaded <= rss_goal,
    )
    cpu = max(v for n, v in mem["cpu"].items() if n.startswith("node"))
    cpu_empty = max(v for n, v in mem["empty_cpu"].items() if n.startswith("node"))
    row(
        f"idle node CPU with {mem['replicas']:,} replicas (max of 3, of one core)",
        f"{cpu:.1%}",
        f"{cpu_empty:.1%} no topics",
        None,
        "" if cpu_goal is None else f"<= {cpu_goal:.0%}",
        None if cpu_goal is None else cpu <= cpu_goal,
    )
    never = f"not within {mem['patience']:.0f} s"
    row(
        f"  {mem['replicas']:,} replicas: until every log and full ISR",
        never if mem["ready"] is None else f"{mem['ready']:.1f} s",
        "logs " + (never if mem["logs"] is None else f"{mem['logs']:.1f} s"),
        None,
    )


if __name__ == "__main__":
    sys.exit(main())
