"""`strom replica-verification`: kafka-replica-verification.sh.

    strom replica-verification --bootstrap-server H:P [--topics-include REGEX]
        [--time -1|-2|MS] [--fetch-size BYTES] [--max-wait-ms MS] [--report-interval-ms MS]

Reads every replica of the matching topics' partitions side by side, as Kafka's tool does:
one fetch per broker per round with Kafka's debugging-consumer replica id (-2), which a broker
answers from the replica it holds, follower or leader, up to that replica's high watermark.
The partitions, their replicas and where to start come from AdminClient (describe_topics,
list_offsets); the fetches go below the client API, as Kafka's tool runs its own fetchers
(the contract in pyproject.toml says why).
Batches at the same position must agree in base offset, last offset and CRC-32C (Kafka
compares offsets and checksums); the first disagreement is printed and the tool exits 1.
Every report interval it prints the largest lag seen (the highest replica high watermark
minus the verified offset), in Kafka's words. It runs until interrupted (Ctrl-C: exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import grpc

from strom import TopicPartition
from strom._loop_thread import shared_loop
from strom.admin import AdminClient, OffsetSpec
from strom.client_properties import client_settings
from strom.cluster import Cluster, parse_bootstrap
from strom.errors import StromError
from strom.security import client_security
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import LOG_OVERHEAD, parse_header
from strom_api.v1 import client_pb2
from strom_tools import command_config

DEBUGGING_CONSUMER_ID = -2  # Kafka's replica id of a fetch that may read a follower
# (base offset, last offset, crc) of one stored batch: what replicas must agree on.
BatchId = tuple[int, int, int]


class ReplicasDisagree(Exception):
    """Two replicas hold different batches at one position."""


@dataclass
class _Reply:
    high_watermark: int = -1
    batches: list[BatchId] = field(default_factory=list)


@dataclass
class _PartitionState:
    replicas: tuple[int, ...]
    offset: int  # everything below is verified
    replies: dict[int, _Reply] = field(default_factory=dict)


class ReplicaVerifier:
    """The tool's core, on the client's I/O loop: rounds of fetches, then verification."""

    def __init__(
        self,
        cluster: Cluster,
        starts: Mapping[TopicPartition, tuple[tuple[int, ...], int]],
        fetch_size: int,
        max_wait_ms: int,
    ) -> None:
        """`starts`: each partition's replicas and the offset to verify from."""
        self.cluster = cluster
        self.fetch_size = fetch_size
        self.max_wait_ms = max_wait_ms
        self.partitions = {
            tp: _PartitionState(replicas, offset)
            for tp, (replicas, offset) in sorted(starts.items())
        }
        self.max_lag = -1
        self.max_lag_partition: TopicPartition | None = None
        self.max_lag_offset = -1

    async def start(self) -> None:
        """Learns the brokers' addresses (the metadata of the cluster)."""
        await self.cluster.refresh()

    async def round(self) -> int:
        """Fetches every partition from every replica once, then verifies what all replicas
        returned; returns how many batches were verified."""
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, state in self.partitions.items():
            state.replies.clear()
            for broker in state.replicas:
                by_broker.setdefault(broker, []).append(tp)
        await asyncio.gather(*(self._fetch(b, tps) for b, tps in by_broker.items()))
        return sum(self._verify(tp, state) for tp, state in self.partitions.items())

    async def _fetch(self, broker: int, tps: list[TopicPartition]) -> None:
        topics: dict[str, list[client_pb2.FetchRequest.Partition]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(
                client_pb2.FetchRequest.Partition(
                    partition=tp.partition,
                    current_leader_epoch=-1,
                    fetch_offset=self.partitions[tp].offset,
                    partition_max_bytes=self.fetch_size,
                )
            )
        request = client_pb2.FetchRequest(
            max_wait_ms=self.max_wait_ms,
            min_bytes=1,
            replica_id=DEBUGGING_CONSUMER_ID,
            topics=[
                client_pb2.FetchRequest.Topic(name=t, partitions=ps) for t, ps in topics.items()
            ],
        )
        try:
            response = await self.cluster.stub(broker).Fetch(
                request, timeout=self.max_wait_ms / 1000 + self.cluster.request_timeout_s
            )
        except (grpc.aio.AioRpcError, StromError):
            return  # a broker down: its partitions are not verified this round
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                if p.error.code != 0:
                    continue  # e.g. a follower not there yet (OFFSET_OUT_OF_RANGE)
                reply = _Reply(p.high_watermark, _batches(p.records))
                self.partitions[tp].replies[broker] = reply

    def _verify(self, tp: TopicPartition, state: _PartitionState) -> int:
        if set(state.replies) != set(state.replicas):
            return 0
        replies = [(broker, state.replies[broker]) for broker in state.replicas]
        count = min(len(reply.batches) for _, reply in replies)
        for i in range(count):
            first_broker, first = replies[0][0], replies[0][1].batches[i]
            for broker, reply in replies[1:]:
                other = reply.batches[i]
                if other != first:
                    raise ReplicasDisagree(
                        f"Partition {tp.topic}-{tp.partition}: replica {first_broker}'s batch "
                        f"of offsets {first[0]}-{first[1]} (checksum {first[2]}) does not match "
                        f"replica {broker}'s batch of offsets {other[0]}-{other[1]} "
                        f"(checksum {other[2]})"
                    )
        if count:
            state.offset = replies[0][1].batches[count - 1][1] + 1
        lag = max(reply.high_watermark for _, reply in replies) - state.offset
        if lag > self.max_lag:
            self.max_lag, self.max_lag_partition, self.max_lag_offset = lag, tp, state.offset
        return count

    def report(self, now: float) -> str:
        tp = self.max_lag_partition
        name = f"{tp.topic}-{tp.partition}" if tp is not None else "none"
        line = (
            f"{_stamp(now)}: max lag is {max(self.max_lag, 0)} for partition {name} at offset "
            f"{self.max_lag_offset} among {len(self.partitions)} partitions"
        )
        self.max_lag, self.max_lag_partition, self.max_lag_offset = -1, None, -1
        return line


def starting_points(
    admin: AdminClient, topics_include: re.Pattern[str], start_time: int
) -> dict[TopicPartition, tuple[tuple[int, ...], int]]:
    """Every partition of the matching topics (internal ones left out), its replicas and
    where verifying starts: the offset of --time (-2 earliest, -1 latest, or the first
    record at or after a time; the end for a time later than every record)."""
    replicas = {
        TopicPartition(t.name, p.partition): tuple(p.replicas)
        for t in admin.describe_topics()
        if topics_include.fullmatch(t.name) and not t.name.startswith("__")
        for p in t.partitions
    }
    if not replicas:
        raise StromError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"no topic matches --topics-include {topics_include.pattern!r}",
        )
    if start_time == -2:
        spec = OffsetSpec.earliest()
    elif start_time == -1:
        spec = OffsetSpec.latest()
    else:
        spec = OffsetSpec.for_timestamp(start_time)
    found = {
        tp: info.offset for tp, info in admin.list_offsets(dict.fromkeys(replicas, spec)).items()
    }
    late = [tp for tp, offset in found.items() if offset < 0]
    if late:
        ends = admin.list_offsets(dict.fromkeys(late, OffsetSpec.latest()))
        found.update((tp, info.offset) for tp, info in ends.items())
    return {tp: (replicas[tp], found[tp]) for tp in replicas}


def _batches(records: bytes) -> list[BatchId]:
    out = []
    pos = 0
    while pos + LOG_OVERHEAD <= len(records):
        header = parse_header(records, pos)
        if pos + header.size > len(records):
            break  # a partial batch at the end of a fetch is not compared
        out.append((header.base_offset, header.last_offset, header.crc))
        pos += header.size
    return out


def _stamp(t: float) -> str:
    """Kafka's tool prints times as yyyy-MM-dd HH:mm:ss,SSS."""
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


# --- the command ---------------------------------------------------------------------------


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "replica-verification",
        help="check that all replicas of partitions hold the same data "
        "(as kafka-replica-verification.sh)",
        description=__doc__.split("\n\n")[2] if __doc__ else None,
    )
    parser.add_argument(
        "--bootstrap-server", "--broker-list", required=True, help="HOST:PORT[,HOST:PORT...]"
    )
    command_config.add_option(parser)
    parser.add_argument(
        "--topics-include",
        "--topic-white-list",
        default=".*",
        help="regular expression of the topics to verify (default: all but internal topics)",
    )
    parser.add_argument(
        "--time",
        type=int,
        default=-1,
        help="where to start: -2 the earliest offset, -1 the latest (default), or a "
        "timestamp in ms",
    )
    parser.add_argument(
        "--fetch-size", type=int, default=1024 * 1024, help="bytes per partition per fetch"
    )
    parser.add_argument(
        "--max-wait-ms", type=int, default=1000, help="how long a fetch waits for data"
    )
    parser.add_argument(
        "--report-interval-ms", type=int, default=30_000, help="how often to print the lag"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    try:
        return _verify(args, out)
    except StromError as exc:
        print(f"Error: {exc.name}: {exc.message}", file=sys.stderr)
        return 1
    except ReplicasDisagree as exc:
        out(str(exc))
        return 1
    except KeyboardInterrupt:
        # Ctrl-C is how this tool ends (as Kafka's, which exits the JVM): leave at once. A
        # normal interpreter exit could wait on gRPC's shutdown while the I/O thread still
        # holds a fetch the interrupt cut short.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _verify(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    for option in ("fetch_size", "max_wait_ms", "report_interval_ms"):
        if getattr(args, option) <= 0:
            raise StromError(
                ErrorCode.INVALID_CONFIG, f"--{option.replace('_', '-')} must be positive"
            )
    try:
        pattern = re.compile(args.topics_include)
    except re.error as exc:
        raise StromError(
            ErrorCode.INVALID_CONFIG, f"--topics-include is not a regular expression: {exc}"
        ) from None
    settings = client_settings(args.command_config)
    with AdminClient(bootstrap_servers=args.bootstrap_server, **settings) as admin:
        starts = starting_points(admin, pattern, args.time)
    io = shared_loop()

    async def build() -> ReplicaVerifier:
        cluster = Cluster(
            parse_bootstrap(args.bootstrap_server),
            30_000,
            100,
            300_000,
            tls=client_security(**settings),
        )
        verifier = ReplicaVerifier(cluster, starts, args.fetch_size, args.max_wait_ms)
        await verifier.start()
        return verifier

    verifier = io.run(build())
    try:
        out(f"{_stamp(time.time())}: verification process is started.")
        next_report = time.monotonic() + args.report_interval_ms / 1000
        while True:
            pending = io.submit(verifier.round())
            try:
                verified = pending.result()
            except KeyboardInterrupt:
                pending.cancel()  # the round's fetches stop on the I/O thread too
                raise
            if time.monotonic() >= next_report:
                out(verifier.report(time.time()))
                next_report = time.monotonic() + args.report_interval_ms / 1000
            if not verified:
                time.sleep(0.05)  # nothing new anywhere: no busy loop while replicas lag
    finally:
        with contextlib.suppress(Exception):  # closing is best effort on the way out
            io.run(verifier.cluster.close(), 5)


__all__ = ["ReplicaVerifier", "ReplicasDisagree", "add_command", "main", "starting_points"]
