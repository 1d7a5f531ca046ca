"""Random field values with a bias to the boundaries where parsers and arithmetic break, and
to the names the cluster knows (so a request reaches the code past "unknown topic")."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)

# Config names a topic or broker knows, so a random config reaches its validation.
CONFIG_NAMES = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "min.insync.replicas",
    "max.message.bytes",
    "compression.type",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "num.partitions",
    "default.replication.factor",
    "log.retention.ms",
    "auto.create.topics.enable",
    "no.such.config",
)
CONFIG_VALUES = (
    "",
    "-1",
    "0",
    "1",
    "2147483648",
    "9223372036854775808",
    "compact,delete",
    "delete",
    "gzip",
    "zstd",
    "nonsense",
    "true",
    "LogAppendTime",
    "1e9",
    "NaN",
)


@dataclass
class Context:
    """What the cluster holds, for names worth choosing."""

    topics: dict[str, int]  # name -> partition count, created at the start
    topic_ids: dict[str, bytes]
    groups: list[str]
    members: list[int]  # broker ids (and Raft voters): never used as a sender id
    non_members: tuple[int, ...] = (0, -1, 4, 99, 1000, 2**31 - 1, -(2**31))
    names: list[str] = field(default_factory=list)
    # A secured cluster (tests/fuzz/secured.py): a genuine SASL session token per (node,
    # listener), minted for a connection the fuzzer's calls never use (replayed, it must
    # be refused; tampered, too). Empty on a plaintext cluster.
    tokens: dict[tuple[int, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = [*self.topics, "__consumer_offsets", *self.groups]


def int_value(rng: random.Random, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    roll = rng.random()
    if roll < 0.45:
        return rng.choice((0, 1, 2, 3, -1, -2, lo, hi, lo + 1, hi - 1, 1000, 10**9))
    if roll < 0.7:
        return rng.randint(-5, 20)
    if roll < 0.85:
        return rng.choice((2**7, 2**8, 2**15, 2**16, 2**31, 2**32, 2**53)) + rng.randint(-1, 1)
    return rng.randint(lo, hi)


def clamp(value: int, bounds: tuple[int, int]) -> int:
    return max(bounds[0], min(bounds[1], value))


def text(rng: random.Random, ctx: Context, budget: list[int]) -> str:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(ctx.names)
    if roll < 0.45:
        return ""
    if roll < 0.55:
        return rng.choice(CONFIG_NAMES)
    if roll < 0.65:
        return rng.choice(CONFIG_VALUES)
    if roll < 0.72 and budget[0] > 300_000:
        n = rng.choice((250, 256, 1000, 100_000, 300_000))
        budget[0] -= n
        return rng.choice("ax.-_/") * n
    if roll < 0.85:
        alphabet = "abcXYZ019._-/ \x00\u00e9\u2603\U0001f600\\\n"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
    return f"fuzz-{rng.randint(0, 10**6)}"


def blob(rng: random.Random, ctx: Context, budget: list[int]) -> bytes:
    roll = rng.random()
    if roll < 0.3 and ctx.topic_ids:
        return rng.choice(list(ctx.topic_ids.values()))
    if roll < 0.4:
        return b""
    if roll < 0.5:
        return bytes(16)
    if roll < 0.55 and budget[0] > 1_100_000:
        budget[0] -= 1_000_000
        return rng.randbytes(1_000_000)
    return rng.randbytes(rng.choice((1, 15, 16, 17, 61, rng.randint(0, 300))))
