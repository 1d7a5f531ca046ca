"""A Raft node as its own OS process, for the integration tests and bench/bench_raft.py.

    python tests/raft_integration/node_process.py --node-id 1 \
        --voters 1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103 \
        --dir /tmp/n1 --control-port 9201 [--observer-address 127.0.0.1:9104]

Runs a RaftDriver (real gRPC, real metadata log on disk). The product's node process is
`strom server` (the controller issue); this one only adds a test control service on
`--control-port`, a gRPC generic handler with raw bytes so no test API enters the
contract:
    strom.test.RaftNode/Append  records separated by b"\\n" -> b"<offset>" or b"ERR <name> <msg>"
    strom.test.RaftNode/Status  b"" -> JSON: role, epoch, leader, hw, applied, digest,
                                log_start, snapshots_fetched
    strom.test.RaftNode/Records b"" -> every committed record, b"\n"-separated
    strom.test.RaftNode/Snapshot b"" -> b"<end>-<epoch>": a snapshot of all it applied
`digest` is a SHA-256 over every committed non-control record, in order, so two nodes agree
on their committed history exactly when their digests at equal `applied` counts match.
SIGTERM stops gracefully (the leader resigns first); SIGKILL is the crash.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import signal
import sys
import threading
from collections.abc import Sequence

import grpc
import grpc.aio
import uvloop

from raft.config import RaftConfig
from raft.core import NotLeaderError
from raft.driver import RaftDriver
from raft.messages import Entry, LeaderAndEpoch, SnapshotId
from server.server_config import parse_voters

SERVICE = "strom.test.RaftNode"


class DigestListener:
    def __init__(self) -> None:
        self.applied = 0
        self.digest = hashlib.sha256()
        self.records: list[bytes] = []

    def handle_commit(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if not entry.control:
                self.applied += 1
                self.records.append(entry.data)
                self.digest.update(len(entry.data).to_bytes(4, "big") + entry.data)

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: Sequence[bytes]) -> None:
        self.applied = 0
        self.digest = hashlib.sha256()
        self.records = []
        self.handle_commit([Entry(i, snapshot_id.epoch, r) for i, r in enumerate(records)])

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


async def serve(args: argparse.Namespace) -> None:
    voters = parse_voters(args.voters)
    listen = voters.get(args.node_id) or args.observer_address
    listener = DigestListener()
    config = RaftConfig.from_properties(dict(kv.split("=", 1) for kv in args.config))
    driver = RaftDriver(args.node_id, voters, listen, args.dir, listener, config)
    await driver.start()

    async def append(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            return str(await driver.append(request.split(b"\n"))).encode()
        except NotLeaderError as exc:
            return f"ERR NOT_LEADER_OR_FOLLOWER leader={exc.leader.leader_id}".encode()

    async def status(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        core = driver.core
        assert core is not None
        return json.dumps(
            {
                "node": args.node_id,
                "role": core.role.value,
                "epoch": core.epoch,
                "leader": core.leader_id,
                "hw": core.high_watermark,
                "log_end": core.log.end_offset(),
                "applied": listener.applied,
                "digest": listener.digest.hexdigest(),
                "log_start": core.log.start().end_offset,
                "snapshots_fetched": core.snapshots_fetched,
                "commit_latency_avg_ms": driver.stats().commit_latency_avg_ms,
                "appends_committed": driver.stats().appends_committed,
            }
        ).encode()

    async def records(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"\n".join(listener.records)

    async def snapshot(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        core = driver.core
        assert core is not None
        taken = await driver.create_snapshot(core.applied, list(listener.records))
        return f"{taken.end_offset}-{taken.epoch}".encode()

    control = grpc.aio.server()
    control.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Append": grpc.unary_unary_rpc_method_handler(append),
                    "Status": grpc.unary_unary_rpc_method_handler(status),
                    "Records": grpc.unary_unary_rpc_method_handler(records),
                    "Snapshot": grpc.unary_unary_rpc_method_handler(snapshot),
                },
            )
        ]
    )
    control.add_insecure_port(f"127.0.0.1:{args.control_port}")
    await control.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    # The parent holds our stdin: when it goes away (even by kill -9), stdin ends and so do
    # we, so a crashed test or benchmark never leaves nodes running. A daemon thread, not the
    # loop's executor: asyncio.run would wait for that blocked read at exit.
    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("ready", flush=True)
    await stop.wait()
    await driver.stop(graceful=True)
    await control.stop(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--voters", required=True, help="id@host:port,...")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--observer-address", help="host:port to listen on as an observer")
    parser.add_argument("--config", nargs="*", default=[], help="controller.quorum.*=value")
    # The node's one event loop runs on uvloop, as the product's node process does: grpc.aio
    # works on any asyncio loop, and this one commits 9-12% more per second here.
    uvloop.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
