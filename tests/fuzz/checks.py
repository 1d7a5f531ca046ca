"""What the fuzzer asserts about the cluster between cases: every node alive and answering
health within 1 s, topics unchanged by a refused request, logs that do not grow per bad
request, stored batches that decode, and a normal round trip with the client library."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]

from strom_api.records import decode_batches
from strom_api.tls import ChannelSecurity
from strom_api.v1 import (
    client_pb2,
    client_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
)
from tests.fuzz.services import Outcome, Rpc
from tests.node_integration.node_cluster import NodeCluster

HEALTH_DEADLINE_S = 1.0
# Answers that do not say whether the request took effect (Kafka's unknown-fate errors):
# they are neither a refusal nor an acceptance.
UNKNOWN_FATE = {
    common_pb2.REQUEST_TIMED_OUT,
    common_pb2.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    common_pb2.NETWORK_EXCEPTION,
    common_pb2.UNKNOWN_SERVER_ERROR,
}
UNKNOWN_FATE_STATUS = {
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
}
OFFSETS_TOPIC = "__consumer_offsets"


def _own_codes(msg: Any) -> list[int]:
    """The error codes a message carries itself (not its elements'); an unset Error is
    NONE."""
    codes = []
    for f in msg.DESCRIPTOR.fields:
        if f.is_repeated:
            continue
        if f.type == FieldDescriptor.TYPE_ENUM and f.enum_type.name == "ErrorCode":
            codes.append(getattr(msg, f.name))
        elif f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.message_type.full_name == "strom_api.v1.Error":
                codes.append(getattr(msg, f.name).code)
            elif f.message_type.full_name == "strom_api.v1.ControllerError":
                codes.append(getattr(msg, f.name).error.code)
    return codes


def _item_codes(msg: Any, out: list[int]) -> None:
    """The codes of every element of the message's repeated fields (topics, partitions, ...),
    innermost first-class: an element with no error of its own counts as NONE."""
    for f in msg.DESCRIPTOR.fields:
        if f.type != FieldDescriptor.TYPE_MESSAGE or f.message_type.GetOptions().map_entry:
            continue
        if f.is_repeated:
            for element in getattr(msg, f.name):
                inner: list[int] = []
                _item_codes(element, inner)
                out.extend(inner if inner else _own_codes(element) or [0])
        elif msg.HasField(f.name) and f.message_type.full_name not in (
            "strom_api.v1.Error",
            "strom_api.v1.ControllerError",
        ):
            _item_codes(getattr(msg, f.name), out)


def verdict(rpc: Rpc, outcome: Outcome, requests: int = 1) -> str:
    """ "refused", "accepted" or "unknown" (the request may or may not have taken effect).
    Refused: a gRPC error, a whole-request error, or an error on every item it names.
    A stream of several `requests` that ended in a gRPC error may have carried out the ones
    before the one that ended it (a ProduceStream appends a request before reading the
    next): unknown, unless the RPC changes nothing."""
    if outcome.code in UNKNOWN_FATE_STATUS:
        return "unknown"
    if outcome.code != grpc.StatusCode.OK:
        return "unknown" if requests > 1 and not rpc.read_only else "refused"
    whole: list[int] = []
    items: list[int] = []
    silent = False  # a message answered with no code at all: an acks=0 Produce's empty answer
    for data in outcome.responses:
        msg = rpc.response_class()()
        try:
            msg.ParseFromString(data)
        except DecodeError:
            return "unknown"
        own = _own_codes(msg)
        counted = len(items)
        _item_codes(msg, items)
        silent = silent or (not own and len(items) == counted)
        whole += own
    if any(c in UNKNOWN_FATE for c in whole + items):
        return "unknown"
    if silent and len(outcome.responses) > 1:
        return "unknown"  # a stream's acks=0 request may have been appended beside refusals
    if any(c != 0 for c in whole) or (items and all(c != 0 for c in items)):
        return "refused"
    return "accepted"


def health_problems(
    cluster: NodeCluster, open_channel: Callable[[str], grpc.Channel] = grpc.insecure_channel
) -> list[str]:
    """One line per node that has exited or does not answer grpc.health.v1 Check("") on
    both its listeners within HEALTH_DEADLINE_S (over a channel `open_channel` makes: TLS
    on a secured cluster)."""
    problems = []
    for node in cluster.ids:
        proc = cluster.procs.get(node)
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            problems.append(f"node {node} exited (status {code})")
            continue
        for listener, port in (
            ("broker", cluster.broker_port[node]),
            ("controller", cluster.controller_port[node]),
        ):
            started = time.monotonic()
            try:
                with open_channel(f"127.0.0.1:{port}") as channel:
                    stub = health_pb2_grpc.HealthStub(channel)
                    stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=HEALTH_DEADLINE_S)
            except grpc.RpcError as e:
                # One event loop serves both listeners: the second would only wait as long.
                problems.append(
                    f"node {node} {listener} health: {e.code().name} after "  # type: ignore[attr-defined]
                    f"{time.monotonic() - started:.2f} s"
                )
                break
    return problems


def quorum_problem(controllers: dict[int, grpc.Channel], wait_s: float = 5.0) -> str | None:
    """None while the controllers agree on an active controller (within `wait_s`, for an
    election in progress); health says SERVING on a node whose quorum is gone, so this is
    asked separately."""
    deadline = time.monotonic() + wait_s
    seen: set[int] = set()
    while True:
        leaders = set()
        for channel in controllers.values():
            try:
                answer = controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(  # type: ignore[no-untyped-call]
                    controller_pb2.DescribeClusterRequest(), timeout=1
                )
                leaders.add(answer.controller_id)
            except grpc.RpcError:
                leaders.add(-1)
        seen |= leaders
        if len(leaders) == 1 and -1 not in leaders:
            return None
        if time.monotonic() > deadline:
            return f"quorum: no agreed active controller for {wait_s:.0f} s (seen {sorted(seen)})"
        time.sleep(0.2)


class Snapshot:
    """The state a refused request must leave alone: every topic with its partition count
    and dynamic configs (one DescribeTopics), and each partition's latest offset (one
    ListOffsets per broker; a partition's leader answers it). __consumer_offsets's offsets
    are left out: the group coordinator writes them on its own as sessions expire."""

    def __init__(
        self, brokers: dict[int, grpc.Channel], controllers: dict[int, grpc.Channel]
    ) -> None:
        self.brokers = brokers
        self.controllers = controllers  # persistent channels: a snapshot is a few ms

    def _describe(self) -> Any | None:
        for channel in self.controllers.values():
            try:
                return controller_pb2_grpc.ControllerServiceStub(channel).DescribeTopics(  # type: ignore[no-untyped-call]
                    controller_pb2.DescribeTopicsRequest(), timeout=2
                )
            except grpc.RpcError:
                continue
        return None

    def take(self) -> dict[str, Any] | None:
        described = self._describe()
        if described is None:
            return None
        state: dict[str, Any] = {}
        request = client_pb2.ListOffsetsRequest()
        for topic in described.topics:
            state[topic.name] = (len(topic.partitions), tuple(sorted(topic.configs.items())))
            if topic.name != OFFSETS_TOPIC:
                request.topics.add(
                    name=topic.name,
                    partitions=[
                        client_pb2.ListOffsetsRequest.Partition(
                            partition=p.partition, current_leader_epoch=-1, timestamp=-1
                        )
                        for p in topic.partitions
                    ],
                )
        for channel in self.brokers.values():
            try:
                answer = client_pb2_grpc.ClientServiceStub(channel).ListOffsets(  # type: ignore[no-untyped-call]
                    request, timeout=2
                )
            except grpc.RpcError:
                continue
            for t in answer.topics:
                for p in t.partitions:
                    if p.error.code == 0:
                        state[f"{t.name}-{p.partition}"] = p.offset
        return state

    def settled(self, timeout_s: float = 3.0) -> dict[str, Any] | None:
        """A snapshot once two in a row agree (an accepted produce's high watermark moves
        after its answer, as followers catch up)."""
        deadline = time.monotonic() + timeout_s
        last = self.take()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.take()
            if now == last and now is not None:
                return now
            last = now
        return last


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    diffs = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key) and not _offset_unknown(key, before, after):
            diffs.append(f"{key}: {before.get(key)!r} -> {after.get(key)!r}")
    return diffs


def _offset_unknown(key: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether `key` is a partition of a topic both snapshots hold alike whose latest
    offset one of them could not learn: its leader was still being elected (the partitions
    an accepted CreatePartitions just added), which no request in between changed."""
    if key in before and key in after:
        return False
    topic, _, partition = key.rpartition("-")
    shape = before.get(topic)
    if not partition.isdigit() or not isinstance(shape, tuple) or shape != after.get(topic):
        return False
    return int(partition) < shape[0]


def log_sizes(cluster: NodeCluster) -> dict[int, int]:
    return {
        node: os.path.getsize(os.path.join(cluster.base, f"node{node}", "server.log"))
        for node in cluster.ids
    }


_TRACEBACK_END = re.compile(r"^(\w[\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$", re.M)
_METHOD = re.compile(r"servicer method \[(/[\w.]+/\w+)\]")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_QUOTED = re.compile(r"'[^']*'")
_NUMBER = re.compile(r"-?\d+")
_FRAME = re.compile(r'^  File "([^"]+)", line (\d+), in (\w+)$', re.M)


def tracebacks(text: str, rpcs: dict[str, set[str]] | None = None) -> dict[str, int]:
    """Distinct tracebacks in a log: "innermost project frame: exception line" -> count.
    `rpcs` collects, per key, the RPCs that grpc named in the log line before it."""
    found: dict[str, int] = {}
    blocks = text.split("Traceback (most recent call last):")
    for before, block in zip(blocks, blocks[1:], strict=False):
        frames = [
            f
            for f in _FRAME.findall(block)
            if "/site-packages/" not in f[0] and "/lib/python" not in f[0]
        ]
        end = _TRACEBACK_END.search(block)
        where = f"{os.path.basename(frames[-1][0])}:{frames[-1][2]}" if frames else "?"
        # One key per cause, not per message type or value: numbers and quoted names go.
        what = (
            _QUOTED.sub("'…'", _NUMBER.sub("N", _HEX.sub("", end.group(1))))[:120] if end else "?"
        )
        key = f"{where}: {what}"
        found[key] = found.get(key, 0) + 1
        method = _METHOD.findall(before[-400:])
        if rpcs is not None and method:
            rpcs.setdefault(key, set()).add(method[-1].rsplit(".", 1)[-1])
    return found


def _batch_problem(records: bytes) -> str | None:
    """Why these whole batches would stop a consumer, or None."""
    try:
        batches = list(decode_batches(records))
    except Exception as e:
        return repr(e)[:300]
    for header, decoded in batches:
        if len(decoded) != header.record_count:
            return (
                f"batch at offset {header.base_offset} claims {header.record_count} records "
                f"and holds {len(decoded)}"
            )
        if decoded and decoded[-1].offset != header.base_offset + header.last_offset_delta:
            return (
                f"batch at offset {header.base_offset}: lastOffsetDelta "
                f"{header.last_offset_delta} but its last record is at {decoded[-1].offset}"
            )
    return None


def appended_batches_problems(channel: grpc.Channel, request: bytes, response: bytes) -> list[str]:
    """For each partition a Produce answered NONE, reads back what was appended at the
    offset it gave (from the broker that answered, the leader) and says what a consumer
    would fail on."""
    produced = client_pb2.ProduceRequest.FromString(request)
    answered = client_pb2.ProduceResponse.FromString(response)
    stub = client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]
    problems = []
    for topic in answered.topics:
        for p in topic.partitions:
            if p.error.code != 0 or p.base_offset < 0:
                continue
            fetch = client_pb2.FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                replica_id=-1,
                topics=[
                    client_pb2.FetchRequest.Topic(
                        name=topic.name,
                        partitions=[
                            client_pb2.FetchRequest.Partition(
                                partition=p.partition,
                                current_leader_epoch=-1,
                                fetch_offset=p.base_offset,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            )
            records = b""
            for _ in range(20):  # acks=0/1: below the high watermark a moment later
                try:
                    got = stub.Fetch(fetch, timeout=2).topics[0].partitions[0]
                except (grpc.RpcError, IndexError):
                    break
                records = got.records
                if records or got.error.code != 0:
                    break
                time.sleep(0.02)
            problem = _batch_problem(records) if records else None
            if problem:
                sent = [
                    len(part.records)
                    for t in produced.topics
                    if t.name == topic.name
                    for part in t.partitions
                    if part.partition == p.partition
                ]
                problems.append(
                    f"{topic.name}-{p.partition} answered NONE at offset {p.base_offset} "
                    f"({sent[:1]} bytes sent); stored batch: {problem}"
                )
    return problems


def unreadable_batches(
    cluster: NodeCluster, names: list[str], security: ChannelSecurity = None
) -> list[str]:
    """Each partition of the topics `names` that still exist, read from its start: a stored
    batch that does not decode, or holds another number of records than its header says, is
    one every consumer fails on (a poison batch accepted)."""
    from tests.data_plane.data_client import DataClient

    client = DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids}, security)
    described = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=names))
    bad = []
    for t in described.topics:
        if t.error.code != 0:
            continue
        topic = t.name
        for partition in (p.partition for p in t.partitions):
            # From the log start: a fuzzed DeleteRecords may have moved it past 0 (reading
            # at 0 then answers OFFSET_OUT_OF_RANGE, rightly).
            try:
                offset = _log_start(client, topic, partition)
            except Exception as e:
                bad.append(f"{topic}-{partition}: no log start: {e!r}"[:300])
                continue
            for _ in range(200):
                try:
                    leader = client.leader(topic, partition, timeout_s=5)
                    answer = client.fetch_raw(leader, topic, partition, offset)
                except Exception as e:
                    bad.append(f"{topic}-{partition}: could not read at {offset}: {e!r}"[:300])
                    break
                p = answer
                if p.error.code != 0:
                    bad.append(
                        f"{topic}-{partition} at {offset}: "
                        f"{common_pb2.ErrorCode.Name(p.error.code)}"
                    )
                    break
                if not p.records:
                    break
                problem = _batch_problem(p.records)
                if problem:
                    bad.append(f"{topic}-{partition} at offset {offset}: {problem}")
                    break
                batches = list(decode_batches(p.records))
                if not batches:
                    break
                last = batches[-1][0]
                offset = last.base_offset + last.last_offset_delta + 1
    return bad


def _log_start(client: Any, topic: str, partition: int) -> int:
    request = client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ListOffsetsRequest.Partition(partition=partition, timestamp=-2)
                ],
            )
        ]
    )
    leader = client.leader(topic, partition, timeout_s=5)
    answer = client.stub(leader).ListOffsets(request, timeout=5).topics[0].partitions[0]
    if answer.error.code != 0:
        raise RuntimeError(common_pb2.ErrorCode.Name(answer.error.code))
    return int(answer.offset)
