"""Field values at the boundaries of their Kafka types, and names the cluster knows, for the
mutations that keep a request well-formed (every value fits its type: a string is UTF-8
of at most 32,767 bytes, a number is in its range, a null only where the schema allows one).
"""

from __future__ import annotations

import random
import uuid

from strom_api import compression
from strom_api.records import Record, encode_batch
from tests.fuzz.batches import records_value
from tests.fuzz.values import CONFIG_NAMES, CONFIG_VALUES, clamp, int_value
from tests.kafka_fuzz.seeds import Context

BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "timedelta_i32": (-(2**31), 2**31 - 1),
    "timedelta_i64": (-(2**63), 2**63 - 1),
}
MAX_STRING_BYTES = 32_767
# Names that exist, names the broker keeps to itself, and names Kafka's rules refuse
# (249 characters is a topic name's limit, "." and ".." are refused, so are "/" and " ").
INTERNAL_TOPICS = ("__consumer_offsets", "__cluster_metadata", "__transaction_state")
ODD_NAMES = (
    "",
    ".",
    "..",
    "*",
    "a/b",
    "a b",
    "\x00",
    "no-such-topic",
    "x" * 249,
    "x" * 250,
    "\u00e9\u2603\U0001f600",
    "${jndi:ldap://x}",
    "%s%n",
    "-1",
    "User:*",
)


def number(rng: random.Random, kafka_type: str) -> int:
    bounds = BOUNDS[kafka_type]
    return clamp(int_value(rng, bounds), bounds)


def text(rng: random.Random, ctx: Context, destructive: bool) -> str:
    """A string; for a `destructive` request never a data topic's or internal topic's name."""
    roll = rng.random()
    if roll < 0.4:
        known = [ctx.victim, *ctx.groups]
        if not destructive:
            known += [*ctx.topics, *INTERNAL_TOPICS]
        return rng.choice(known)
    if roll < 0.6:
        return rng.choice(ODD_NAMES)
    if roll < 0.75:
        return rng.choice(CONFIG_NAMES + CONFIG_VALUES)
    if roll < 0.85:
        return rng.choice("ax.-_") * rng.choice((1000, MAX_STRING_BYTES))
    alphabet = "abcXYZ019._-/ \x00\u00e9\u2603\U0001f600\\\n"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))


def blob(rng: random.Random) -> bytes:
    return rng.choice((b"", bytes(16), rng.randbytes(rng.randint(1, 200)), bytes(100_000)))


def records(rng: random.Random) -> bytes:
    """A Produce's records: poisoned batches (tests/fuzz/batches.py), bytes that are no
    batch at all, or a batch that inflates to 20 MB."""
    roll = rng.random()
    if roll < 0.8:
        return records_value(rng)
    if roll < 0.95:
        return rng.randbytes(rng.choice((1, 12, 61, rng.randint(0, 300))))
    codec = rng.choice((compression.GZIP, compression.ZSTD, compression.LZ4))
    return encode_batch(
        [Record(0, 1_700_000_000_000, b"k", bytes(20 << 20), ())], compression_codec=codec
    )


def topic_id(rng: random.Random, ctx: Context, destructive: bool) -> uuid.UUID | None:
    known = [i for name, i in ctx.topic_ids.items() if not (destructive and name in ctx.topics)]
    return rng.choice(
        (None, uuid.UUID(int=2**128 - 1), uuid.UUID(int=rng.getrandbits(128)), *known)
    )
