"""Random protobuf messages built from their descriptors, and mutations of well-formed ones.

Nothing here knows an RPC: a message type's descriptor is enough. `budget` (a one-element
list, shared down the recursion) caps a message's size so that a request stays under a few
MiB even when a repeated field draws a count in the thousands.
"""

from __future__ import annotations

import random
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tests.fuzz.values import INT32, INT64, UINT32, UINT64, Context, blob, clamp, int_value, text

MAX_DEPTH = 5
BUDGET = 3_000_000  # bytes-ish a message may spend

_INT_BOUNDS = {
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_INT64: INT64,
    FieldDescriptor.TYPE_SINT64: INT64,
    FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT32: UINT32,
    FieldDescriptor.TYPE_FIXED32: UINT32,
    FieldDescriptor.TYPE_UINT64: UINT64,
    FieldDescriptor.TYPE_FIXED64: UINT64,
}


def new_budget() -> list[int]:
    return [BUDGET]


def scalar(rng: random.Random, f: FieldDescriptor, ctx: Context, budget: list[int]) -> Any:
    budget[0] -= 8
    if f.type in _INT_BOUNDS:
        return max(
            _INT_BOUNDS[f.type][0], min(_INT_BOUNDS[f.type][1], int_value(rng, _INT_BOUNDS[f.type]))
        )
    if f.type == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if f.type == FieldDescriptor.TYPE_ENUM:
        if rng.random() < 0.8:
            return rng.choice(f.enum_type.values).number
        return clamp(int_value(rng, INT32), INT32)  # proto3 enums are open: unknown numbers travel
    if f.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return rng.choice((0.0, -1.0, 1e308, float("nan"), float("inf"), rng.random()))
    if f.type == FieldDescriptor.TYPE_STRING:
        return text(rng, ctx, budget)
    if f.type == FieldDescriptor.TYPE_BYTES:
        return blob(rng, ctx, budget)
    raise AssertionError(f"unhandled field type {f.type} of {f.full_name}")


def repeat_count(rng: random.Random, budget: list[int]) -> int:
    roll = rng.random()
    if roll < 0.15:
        return 0
    if roll < 0.75:
        return rng.randint(1, 3)
    if roll < 0.9:
        return rng.randint(4, 30)
    # Thousands of elements: as many as the budget allows (each costs at least ~8).
    return min(rng.choice((1000, 10_000, 100_000)), max(0, budget[0] // 64))


def random_message(
    rng: random.Random, desc: Descriptor, ctx: Context, budget: list[int], depth: int = 0
) -> Any:
    msg = message_factory.GetMessageClass(desc)()
    fill(rng, msg, ctx, budget, depth)
    return msg


def fill(rng: random.Random, msg: Any, ctx: Context, budget: list[int], depth: int) -> None:
    for f in msg.DESCRIPTOR.fields:
        if budget[0] <= 0 or rng.random() < 0.2:
            continue
        set_random(rng, msg, f, ctx, budget, depth)


def set_random(
    rng: random.Random, msg: Any, f: FieldDescriptor, ctx: Context, budget: list[int], depth: int
) -> None:
    """Gives field `f` of `msg` a random value (a repeated field random elements)."""
    is_message = f.type == FieldDescriptor.TYPE_MESSAGE
    if is_message and f.message_type.GetOptions().map_entry:
        key_f, value_f = (
            f.message_type.fields_by_name["key"],
            f.message_type.fields_by_name["value"],
        )
        target = getattr(msg, f.name)
        for _ in range(repeat_count(rng, budget) if depth < MAX_DEPTH else 0):
            key = scalar(rng, key_f, ctx, budget)
            if value_f.type == FieldDescriptor.TYPE_MESSAGE:
                fill(rng, target[key], ctx, budget, depth + 1)
            else:
                target[key] = scalar(rng, value_f, ctx, budget)
        return
    if f.is_repeated:
        target = getattr(msg, f.name)
        count = repeat_count(rng, budget)
        if is_message:
            if depth >= MAX_DEPTH:
                return
            if count > 30:
                # Thousands of copies of one element: cheap to build, costly to serve.
                element = random_message(rng, f.message_type, ctx, budget, depth + 1)
                size = max(8, element.ByteSize())
                count = min(count, max(0, budget[0] // size))
                budget[0] -= count * size
                for _ in range(count):
                    target.add().CopyFrom(element)
            else:
                for _ in range(count):
                    fill(rng, target.add(), ctx, budget, depth + 1)
        else:
            target.extend(scalar(rng, f, ctx, budget) for _ in range(count))
        return
    if is_message:
        if depth < MAX_DEPTH:
            fill(rng, getattr(msg, f.name), ctx, budget, depth + 1)
            getattr(msg, f.name).SetInParent()
        return
    setattr(msg, f.name, scalar(rng, f, ctx, budget))


def _fields_in(msg: Any, path: list[Any]) -> list[tuple[Any, FieldDescriptor]]:
    """Every (containing message, field) reachable in `msg`, set or not."""
    found = []
    for f in msg.DESCRIPTOR.fields:
        found.append((msg, f))
        if f.type != FieldDescriptor.TYPE_MESSAGE or f.message_type.GetOptions().map_entry:
            continue
        if f.is_repeated:
            for element in getattr(msg, f.name)[:4]:
                found += _fields_in(element, path)
        elif msg.HasField(f.name):
            found += _fields_in(getattr(msg, f.name), path)
    return found


def mutate(rng: random.Random, msg: Any, ctx: Context, budget: list[int]) -> None:
    """One to three field-level mutations of a well-formed message, in place: a field set to
    a boundary value, cleared, or a repeated field's element copied many times."""
    for _ in range(rng.randint(1, 3)):
        fields = _fields_in(msg, [])
        if not fields:
            return  # an empty message type (DescribeClusterRequest): nothing to mutate
        owner, f = rng.choice(fields)
        roll = rng.random()
        if roll < 0.15:
            owner.ClearField(f.name)
        elif (
            roll < 0.35
            and f.is_repeated
            and len(getattr(owner, f.name)) > 0
            and not (
                f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
            )
        ):
            target = getattr(owner, f.name)
            first = target[0]
            copies = rng.choice((1, 2, 10, 1000, 5000))
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                copies = min(copies, max(1, budget[0] // max(8, first.ByteSize())))
                for _ in range(copies):
                    target.add().CopyFrom(first)
            else:
                target.extend([first] * copies)
        else:
            if f.is_repeated or f.type == FieldDescriptor.TYPE_MESSAGE:
                owner.ClearField(f.name)
            set_random(rng, owner, f, ctx, budget, 3)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Byte-level damage to a serialized message: what a broken client or a cut connection
    delivers. The result may or may not parse."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.3 and out:
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        elif roll < 0.5 and out:
            del out[rng.randrange(len(out)) :]
        elif roll < 0.7:
            i = rng.randint(0, len(out))
            out[i:i] = rng.randbytes(rng.randint(1, 16))
        elif roll < 0.85 and out:
            i = rng.randrange(len(out))
            out[i] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        else:
            # A field with a huge declared length (varint 2^31) where the message ends.
            out += bytes((0x0A, 0x80, 0x80, 0x80, 0x80, 0x08))
    return bytes(out)
