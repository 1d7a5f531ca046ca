"""Case `n` of seed `s`: which RPC, on which node, with which request bytes. Everything is
drawn from random.Random(f"{s}:{n}"), so any case is rebuilt alone from its two numbers
(`python -m tests.fuzz --seed S --case N`).

Kinds of case:
  random    a message of the request type built from its descriptor
  mutated   a well-formed request with one to three fields set to boundary values, cleared,
            or a repeated element copied thousands of times
  damaged   a well-formed request's bytes with bits flipped, cut, or bytes inserted
  batch     (Produce) a well-formed request whose records are poisoned RecordBatch v2 bytes
            with a valid CRC (see batches.py)
  raw       bytes that are not a protobuf of the type at all
  sasl      (SecurityService.SaslAuthenticate, secured clusters) a whole SASL exchange as a
            client without credentials sends it (see sasl.py)
A streaming RPC gets one to four messages per call.

On a secured cluster (tests/fuzz/secured.py) each case also names who calls:
  user       the ordinary SCRAM-SHA-512 user `fuzz`, authenticated (as on a plaintext node)
  anonymous  TLS, no SASL session
  replayed   TLS, a genuine session token minted for another connection
  forged     TLS, a session token tampered with (or garbage, or oversized)
Every call but health and the handshake itself must be refused UNAUTHENTICATED unless it
is the user's.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from tests.fuzz.batches import records_value
from tests.fuzz.messages import mutate, mutate_bytes, new_budget, random_message
from tests.fuzz.sasl import sasl_stream
from tests.fuzz.seeds import well_formed
from tests.fuzz.services import Rpc
from tests.fuzz.values import Context

MAX_REQUEST_BYTES = 4 * 1024 * 1024 - 64 * 1024  # under gRPC's default 4 MiB receive limit

# The data path gets more cases than an admin call: Produce is where poison batches enter.
WEIGHTS = {"Produce": 5, "Fetch": 2, "FetchStream": 2, "Exchange": 2}

# Fields naming a sender that only a member may be.
SENDER_FIELDS = {"replica_id", "broker_id", "src"}


@dataclass
class Case:
    seed: int
    number: int
    rpc: Rpc
    node: int
    kind: str
    requests: list[bytes]
    identity: str = ""  # "" on a plaintext cluster; else see IDENTITIES
    metadata: tuple[tuple[str, str], ...] = ()  # the call's own (a session token)

    @property
    def label(self) -> str:
        who = f", {self.identity}" if self.identity else ""
        where = f"{self.rpc.name} on node {self.node}, {self.kind}{who}"
        return f"seed {self.seed} case {self.number} ({where})"


USER, ANONYMOUS, REPLAYED, FORGED = "user", "anonymous", "replayed", "forged"
IDENTITIES = {USER: 0.45, ANONYMOUS: 0.35, REPLAYED: 0.1, FORGED: 0.1}


def rng_for(seed: int, number: int) -> random.Random:
    return random.Random(f"{seed}:{number}")


def build(seed: int, number: int, rpcs: list[Rpc], ctx: Context) -> Case:
    rng = rng_for(seed, number)
    rpc = rng.choices(rpcs, weights=[WEIGHTS.get(r.method, 1) for r in rpcs])[0]
    node = rng.choice(ctx.members)
    count = rng.randint(1, 4) if rpc.client_streaming else 1
    roll = rng.random()
    if rpc.method == "Produce" and roll < 0.35:
        kind = "batch"
    elif roll < 0.45:
        kind = "mutated"
    elif roll < 0.75:
        kind = "random"
    elif roll < 0.88:
        kind = "damaged"
    else:
        kind = "raw"
    requests = [_request(rng, kind, rpc, ctx) for _ in range(count)]
    if rpc.service == "RaftService":
        # A stream's first message names its sender (the hello); make it a non-voter's.
        requests.insert(
            0,
            _police(
                rpc.request_class()(src=rng.choice(ctx.non_members)), ctx, rng
            ).SerializeToString(),
        )
    case = Case(seed, number, rpc, node, kind, requests)
    if ctx.tokens:  # a secured cluster: drawn last, so plaintext cases stay as they were
        _secure(rng, case, ctx)
    return case


def _secure(rng: random.Random, case: Case, ctx: Context) -> None:
    case.identity = rng.choices(list(IDENTITIES), weights=list(IDENTITIES.values()))[0]
    if case.rpc.service == "SecurityService":
        if rng.random() < 0.7:
            case.kind, case.requests = "sasl", sasl_stream(rng)
        case.identity = ANONYMOUS  # the handshake is what a caller without a session makes
    token = ctx.tokens[(case.node, case.rpc.listener)]
    if case.identity == REPLAYED:
        case.metadata = ((SESSION_KEY, token),)
    elif case.identity == FORGED:
        case.metadata = ((SESSION_KEY, forged_token(rng, token)),)


SESSION_KEY = "strom-sasl-session"  # server/sasl_sessions.METADATA_KEY


def forged_token(rng: random.Random, genuine: str) -> str:
    """A token the node never minted: the genuine one with a character changed, its payload
    swapped for another principal's, cut, or garbage of any length; never the genuine one."""
    forged = _forge(rng, genuine)
    return forged if forged != genuine else genuine + "A"


def _forge(rng: random.Random, genuine: str) -> str:
    body, _, mac = genuine.partition(".")
    roll = rng.random()
    if roll < 0.3:
        i = rng.randrange(len(genuine))
        return genuine[:i] + rng.choice("AQgw_-.=") + genuine[i + 1 :]
    if roll < 0.5:
        payload = b'[1,"User:admin","ipv4:127.0.0.1:1",0]'
        return base64.urlsafe_b64encode(payload).rstrip(b"=").decode() + "." + mac
    if roll < 0.6:
        return genuine[: rng.randrange(len(genuine))]
    if roll < 0.7:
        return "x" * rng.choice((4097, 6000))  # past MAX_TOKEN_CHARS, under gRPC's 8 KiB
    alphabet = "abcXYZ019._-=+/"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))


def _request(rng: random.Random, kind: str, rpc: Rpc, ctx: Context) -> bytes:
    budget = new_budget()
    if kind == "raw":
        size = rng.choice((0, 1, 5, rng.randint(2, 200), 4096, 1 << 20))
        data = rng.randbytes(size)
    elif kind == "random":
        data = random_message(rng, rpc.request, ctx, budget).SerializeToString()
    else:
        msg = well_formed(rng, rpc, ctx)
        if kind == "batch":
            for topic in msg.topics:
                for partition in topic.partitions:
                    partition.records = records_value(rng)
        elif kind == "mutated":
            mutate(rng, msg, ctx, budget)
        data = _police(msg, ctx, rng).SerializeToString()
        if kind == "damaged":
            data = mutate_bytes(rng, data)
    if len(data) > MAX_REQUEST_BYTES:
        data = data[:MAX_REQUEST_BYTES]
    return _police_bytes(data, rpc, ctx, rng)


def _police(msg: Any, ctx: Context, rng: random.Random) -> Any:
    """Replaces a member's id in a sender field by a non-member's (see seeds.py)."""
    for f in msg.DESCRIPTOR.fields:
        if f.name in SENDER_FIELDS and getattr(msg, f.name) in ctx.members:
            setattr(msg, f.name, rng.choice(ctx.non_members))
    return msg


def _police_bytes(data: bytes, rpc: Rpc, ctx: Context, rng: random.Random) -> bytes:
    """The same for bytes that happen to parse: a random or damaged message may name a
    member as its sender by chance."""
    if not SENDER_FIELDS & set(rpc.request.fields_by_name):
        return data
    msg = rpc.request_class()()
    try:
        msg.ParseFromString(data)
    except DecodeError:
        return data  # the node cannot parse it either: no sender at all
    if any(
        getattr(msg, f) in ctx.members for f in SENDER_FIELDS if f in rpc.request.fields_by_name
    ):
        return _police(msg, ctx, rng).SerializeToString()
    return data
