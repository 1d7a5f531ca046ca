"""Case `n` of seed `s`: the node it goes to and the frames sent on one connection, each with
what the broker owes it. Everything is drawn from random.Random(f"{s}:{n}") and the
cluster's Context (names, topic ids, leaders), so any case is rebuilt alone from its two
numbers (`python -m tests.kafka_fuzz --seed S --case N`).

Kinds of frame (mutations.py says more of the middle four):
  seed      a well-formed request of a served API and version (seeds.py)
  values    one with fields at the boundaries of their types              well-formed
  tags      one with tagged fields no schema knows (flexible versions)     well-formed
  trailing  one with bytes after its body, which Kafka's parsers ignore   well-formed
  header    a correlation id at a boundary, a null, empty or 32,767-byte client id (all
            well-formed); bad UTF-8 in the client id, an API key Kafka lacks or the
            listener does not serve, a version outside the served range (an ApiVersions
            newer than served is answered in v0 all the same, KIP-511)
  pieces    one length, count or value rewritten on the wire
  bytes     bytes flipped, cut, inserted or overwritten
  size      a frame whose size lies: past the bytes that come, negative, over
            socket.request.max.bytes, below a header, or short of its bytes
  garbage   random bytes, framed or not
A case is one frame, or two to five pipelined on one connection; only the last may be
other than well-formed, so each before it must be answered, in order.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, replace
from typing import Any

from kio.index import load_request_schema

from coordinator.group.records import partition_for_group
from server.kafka.apis import API_VERSIONS, SASL_AUTHENTICATE, SERVED
from tests.kafka_fuzz.cluster import OFFSETS_PARTITIONS, OFFSETS_TOPIC
from tests.kafka_fuzz.mutations import (
    damage,
    get_path,
    leaves,
    mutate_pieces,
    mutate_values,
    unknown_tags,
)
from tests.kafka_fuzz.seeds import JOIN_GROUP, MEMBERSHIP, PRODUCE, Context, Seed, well_formed
from tests.kafka_fuzz.wire import SIZE, encode, framed, header, join, millis, pieces
from tests.kafka_listener.kafka_cluster import MAX_REQUEST_BYTES

# The data path and the group coordinator get more cases than an admin call.
WEIGHTS = {PRODUCE: 4, 1: 3, 3: 2, 8: 2, JOIN_GROUP: 2}
WELL_FORMED_KINDS = {"seed": 1, "values": 4, "tags": 1, "trailing": 0.5}
OTHER_KINDS = {"header": 1, "pieces": 2, "bytes": 1.5, "size": 0.5, "garbage": 0.4}
# A request that tells the broker to wait longer than this (a Fetch's max_wait, a
# timeout) may go unanswered until the case's deadline, as may a JoinGroup in a group
# that has members (it waits for them to rejoin).
WAIT_FIELDS = frozenset({"timeout", "max_wait", "rebalance_timeout"})
WAIT_LIMIT_MS = 2000
UNSERVED_KEYS = (-1, 4, 7, 24, 57, 68, 1000, 9999, 32767)


@dataclass(frozen=True)
class Frame:
    data: bytes  # as sent, its size included
    kind: str
    note: str
    well_formed: bool  # must be answered (unless quiet), never closed
    quiet: bool = False  # a Produce of acks=0: no answer, or its connection closed
    waits: bool = False  # may stay unanswered until the case's deadline
    closes: bool = False  # SaslAuthenticate on a PLAINTEXT listener: answered, then closed
    garbles: bool = False  # what follows it is not read as the frames sent

    def _header(self, fmt: str, at: int) -> int | None:
        return struct.unpack_from(fmt, self.data, at)[0] if len(self.data) >= at + 4 else None

    @property
    def api_key(self) -> int | None:
        return self._header(">h", 4)

    @property
    def version(self) -> int | None:
        return self._header(">h", 6)

    @property
    def correlation_id(self) -> int | None:
        return self._header(">i", 8) if len(self.data) >= 12 else None

    @property
    def answer_schema(self) -> tuple[int, int] | None:
        """(API key, version) of the response owed, if any can be."""
        key, version = self.api_key, self.version
        if key not in SERVED or version is None:
            return None
        if key == API_VERSIONS and version > SERVED[key].max_version:
            return key, 0  # KIP-511
        return (key, version) if SERVED[key].serves(version) else None


@dataclass(frozen=True)
class Case:
    seed: int
    number: int
    node: int
    frames: tuple[Frame, ...]

    @property
    def data(self) -> bytes:
        return b"".join(f.data for f in self.frames)

    @property
    def apis(self) -> str:
        """What the frames are, as their headers say: "Produce v9 values; Fetch v4 seed"."""
        return "; ".join(
            f"{SERVED[f.api_key].name if f.api_key in SERVED else f.api_key} v{f.version} {f.kind}"
            for f in self.frames
        )

    @property
    def label(self) -> str:
        return f"seed {self.seed} case {self.number} (node {self.node}: {self.apis})"


def rng_for(seed: int, number: int) -> random.Random:
    return random.Random(f"{seed}:{number}")


def served() -> list[tuple[int, int]]:
    return [(a.key, v) for a in SERVED.values() for v in range(a.min_version, a.max_version + 1)]


def build(seed: int, number: int, ctx: Context, apis: list[int] | None = None) -> Case:
    """Case `number` of `seed`; `apis` narrows the API keys drawn."""
    rng = rng_for(seed, number)
    keys = sorted(apis or SERVED)
    count = 1 if rng.random() < 0.7 else rng.randint(2, 5)
    base = rng.randrange(2**31 - 8)
    frames, seeds = [], []
    for i in range(count):
        api_key = rng.choices(keys, weights=[WEIGHTS.get(k, 1) for k in keys])[0]
        version = rng.randint(SERVED[api_key].min_version, SERVED[api_key].max_version)
        seeds.append(well_formed(rng, api_key, version, ctx))
        kinds = WELL_FORMED_KINDS if i < count - 1 else {**WELL_FORMED_KINDS, **OTHER_KINDS}
        kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
        frames.append(_frame(rng, kind, api_key, version, seeds[-1], base + i, ctx))
    return Case(seed, number, _node(rng, seeds[0], ctx), tuple(frames))


def _node(rng: random.Random, seed_request: Seed, ctx: Context) -> int:
    """The group's coordinator or the partition's leader, mostly; else any node."""
    if rng.random() < 0.8:
        if seed_request.group is not None:
            partition = partition_for_group(seed_request.group, OFFSETS_PARTITIONS)
            return ctx.leaders.get((OFFSETS_TOPIC, partition), ctx.nodes[0])
        if seed_request.partition in ctx.leaders:
            return ctx.leaders[seed_request.partition]
    return rng.choice(ctx.nodes)


def _frame(
    rng: random.Random,
    kind: str,
    api_key: int,
    version: int,
    seed_request: Seed,
    correlation_id: int,
    ctx: Context,
) -> Frame:
    request = seed_request.request
    note = ""
    if kind == "values":
        request, notes = mutate_values(rng, request, api_key, ctx)
        note = "; ".join(notes)
    head = header(api_key, version, correlation_id, "strom-kafka-fuzz")
    expected = {
        "quiet": api_key == PRODUCE and request.acks == 0,
        "waits": _waits(api_key, request),
        "closes": api_key == SASL_AUTHENTICATE,
    }
    if kind == "tags":
        tagged = unknown_tags(rng, pieces(head) + pieces(request))
        if tagged is None:
            return _frame(rng, "values", api_key, version, seed_request, correlation_id, ctx)
        parts, note = tagged
        return _well_formed(join(parts), kind, note, expected)
    data = encode(head) + encode(request)
    if kind in ("seed", "values"):
        return _well_formed(data, kind, note, expected)
    if kind == "trailing":
        extra = rng.randbytes(rng.randint(1, 64))
        return _well_formed(data + extra, kind, f"{len(extra)} bytes after the body", expected)
    if kind == "header":
        return _header_frame(rng, api_key, version, correlation_id, encode(request), expected)
    malformed = {
        "quiet": api_key == PRODUCE,
        "waits": _may_wait(api_key, version),
        "closes": expected["closes"],
    }
    if kind == "pieces":
        parts, note = mutate_pieces(rng, pieces(head) + pieces(request))
        return Frame(framed(join(parts)), kind, note, False, **malformed)
    if kind == "bytes":
        start = 0 if rng.random() < 0.2 else len(encode(head))
        damaged, note = damage(rng, data, start)
        return Frame(framed(damaged), kind, note, False, **malformed)
    if kind == "size":
        size, note = _lying_size(rng, len(data))
        return Frame(SIZE.pack(size) + data, kind, note, False, **malformed, garbles=True)
    junk = rng.randbytes(rng.choice((1, 4, 12, rng.randint(13, 300), 5000)))
    if rng.random() < 0.5:
        junk_frame = Frame(framed(junk), kind, f"{len(junk)} random bytes", False)
        return replace(junk_frame, quiet=junk_frame.api_key == PRODUCE)
    return Frame(junk, kind, f"{len(junk)} random bytes, unframed", False, garbles=True)


def _well_formed(data: bytes, kind: str, note: str, expected: dict[str, bool]) -> Frame:
    # One over the listener's socket.request.max.bytes is refused whatever it holds.
    fits = len(data) <= MAX_REQUEST_BYTES
    return Frame(
        framed(data),
        kind,
        note if fits else f"{note}; over {MAX_REQUEST_BYTES} bytes",
        fits,
        **expected,
    )


def _header_frame(
    rng: random.Random,
    api_key: int,
    version: int,
    correlation_id: int,
    body: bytes,
    expected: dict[str, bool],
) -> Frame:
    roll = rng.random()
    client_id: str | None = "strom-kafka-fuzz"
    if roll < 0.2:
        correlation_id = rng.choice((-(2**31), -1, 0, 2**31 - 1))
        note = f"correlation id {correlation_id}"
    elif roll < 0.4:
        client_id = rng.choice((None, "", "c" * 32_767))
        note = f"client id {client_id if client_id is None else len(client_id)}"
    head = encode(header(api_key, version, correlation_id, client_id))
    if roll < 0.4:
        return _well_formed(head + body, "header", note, expected)
    malformed = {"waits": _may_wait(api_key, version), "quiet": api_key == PRODUCE}
    if roll < 0.5:  # the client id's bytes, after key, version, correlation id and length
        end = 10 + len(client_id.encode()) if client_id else 10
        bad = head[:10] + b"\xff" * (end - 10) + head[end:]
        return Frame(framed(bad + body), "header", "client id of bad UTF-8", False, **malformed)
    if roll < 0.7:
        other = rng.choice(UNSERVED_KEYS)
        data = struct.pack(">h", other) + head[2:] + body
        return Frame(framed(data), "header", f"API key {other}", False, **malformed)
    served_range = SERVED[api_key]
    other = rng.choice(
        (
            served_range.min_version - 1,
            served_range.max_version + 1,
            -1,
            2**15 - 1,
            rng.randint(0, 40),
        )
    )
    other = other if not served_range.serves(other) else served_range.max_version + 1
    data = head[:2] + struct.pack(">h", other) + head[4:] + body
    # An ApiVersions newer than served is answered (in v0) if its header reads as a v2 one.
    flexible = bool(load_request_schema(api_key, version).__header_schema__.__flexible__)
    answered = api_key == API_VERSIONS and other > served_range.max_version and flexible
    note = f"version {other}"
    if answered:
        return _well_formed(data, "header", note, expected)
    return Frame(framed(data), "header", note, False, **malformed)


def _lying_size(rng: random.Random, actual: int) -> tuple[int, str]:
    roll = rng.random()
    if roll < 0.3:
        extra = rng.choice((1, 100, 1 << 16))
        return actual + extra, f"size {extra} past the bytes sent"
    if roll < 0.45:
        size = rng.choice((-1, -(2**31)))
        return size, f"size {size}"
    if roll < 0.6:
        size = rng.choice((MAX_REQUEST_BYTES + 1, 2**31 - 1))
        return size, f"size {size}, over socket.request.max.bytes"
    if roll < 0.75:
        size = rng.randint(0, 3)
        return size, f"size {size}, short of a header"
    size = rng.randrange(4, max(5, actual))
    return size, f"size {size} of {actual}"


def _waits(api_key: int, request: Any) -> bool:
    if api_key == JOIN_GROUP and not str(request.group_id).startswith("fuzz-join-"):
        return True
    return any(
        f.name in WAIT_FIELDS and millis(get_path(request, path)) > WAIT_LIMIT_MS
        for path, f in leaves(request)
        if not isinstance(path[-1], int)
    )


def _may_wait(api_key: int, version: int) -> bool:
    """Whether a malformed request of that API and version could still ask for a wait."""
    if api_key in MEMBERSHIP:
        return True
    request_type = load_request_schema(api_key, version)
    return any(f.name in WAIT_FIELDS for f in request_type.__dataclass_fields__.values())
