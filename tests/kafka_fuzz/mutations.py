"""The ways a case departs from a well-formed request, from the gentlest to the rudest:

  values   fields of the kio request set to boundary values of their types, arrays
           emptied, nulled (where nullable), repeated or grown to thousands of items: the
           frame stays well-formed and must be answered
  tags     tagged fields no schema knows, in a flexible body's structs or header: Kafka's
           parsers skip them (KIP-482), so the frame must still be answered
  pieces   one length, count or value rewritten on the wire: a null where none may be,
           a length or count past the frame's end, negative, or a varint of 2^35 or of
           six bytes, a string of 40,000 bytes, bad UTF-8, a bool byte of 2
  bytes    bytes flipped, cut, inserted or overwritten with boundary int32s and varints
The frame-level ones (sizes, versions, keys, garbage) are cases.py's.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from tests.kafka_fuzz import values
from tests.kafka_fuzz.seeds import DESTRUCTIVE, Context
from tests.kafka_fuzz.wire import (
    COUNT,
    LENGTH,
    TAGS,
    VALUE,
    Path,
    Piece,
    encode,
    length_bytes,
    read_uvarint,
    uvarint,
)

MANY_ITEMS_BYTES = 900_000  # a grown array stays under the listener's 1 MiB frames
# The largest a compact count may say (kio reserves room for that many items before it
# reads one: 32 GB), more than Kafka's varints hold (once a 20-byte Metadata that made kio
# reserve 274 GB and aborted the node), six bytes, and two that fit a varint and no frame.
HUGE_VARINTS = (
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x7f",
    b"\x80\x80\x80\x80\x80\x01",
    uvarint(2**28),
    uvarint(2**31),
)
HUGE_VARINT_WEIGHTS = (3, 1, 1, 1, 1)


def huge_varint(rng: random.Random) -> bytes:
    return rng.choices(HUGE_VARINTS, HUGE_VARINT_WEIGHTS)[0]


# --- values -------------------------------------------------------------------------


def leaves(entity: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    """(path, dataclass field) of every field of a kio request and of the first items of its
    arrays, an array's items as (..., field name, index)."""
    out: list[tuple[Path, Any]] = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        here = path + (f.name,)
        out.append((here, f))
        shape = classify_field(f)
        if isinstance(shape, EntityField) and value is not None:
            out += leaves(value, here)
        elif isinstance(shape, EntityTupleField) and value:
            for i, item in enumerate(value[:3]):
                out += leaves(item, here + (i,))
        elif isinstance(shape, PrimitiveTupleField) and value:
            out += [(here + (i,), f) for i in range(min(3, len(value)))]
    return out


def get_path(entity: Any, path: Path) -> Any:
    for step in path:
        entity = entity[step] if isinstance(step, int) else getattr(entity, step)
    return entity


def set_path(entity: Any, path: Path, value: Any) -> Any:
    step, rest = path[0], path[1:]
    inner = value if not rest else set_path(get_path(entity, (step,)), rest, value)
    if isinstance(step, int):
        return entity[:step] + (inner,) + entity[step + 1 :]
    return dataclasses.replace(entity, **{step: inner})


def mutate_values(
    rng: random.Random, request: Any, api_key: int, ctx: Context
) -> tuple[Any, list[str]]:
    """One to three fields of `request` given new values, and what was done."""
    notes = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        fields = leaves(request)
        if not fields:
            return request, ["no fields to change"]  # ApiVersions v0-2
        path, f = rng.choice(fields)
        value, note = _new_value(
            rng, f, get_path(request, path), isinstance(path[-1], int), api_key, ctx
        )
        request = set_path(request, path, value)
        notes.append(f"{'/'.join(map(str, path))} {note}")
    return request, notes


def _new_value(
    rng: random.Random, f: Any, current: Any, item: bool, api_key: int, ctx: Context
) -> tuple[Any, str]:
    shape = classify_field(f)
    nullable = is_optional(f) and not item and get_field_tag(f) is None
    if nullable and rng.random() < 0.15:
        return None, ":= null"
    if shape.is_array and not item:
        return _new_array(rng, current or ())
    if isinstance(shape, EntityField):
        return current, "kept"  # its fields are leaves of their own
    kafka_type = f.metadata["kafka_type"]
    destructive = api_key in DESTRUCTIVE
    if kafka_type in values.BOUNDS:  # a duration as its milliseconds (wire.millis)
        value: Any = values.number(rng, kafka_type)
        if kafka_type.startswith("timedelta"):
            return value, f":= {value} ms"
    elif kafka_type == "bool":
        value = not current
    elif kafka_type == "string":
        value = values.text(rng, ctx, destructive)
    elif kafka_type == "records":
        value = values.records(rng)
    elif kafka_type == "bytes":
        value = values.blob(rng)
    else:  # uuid, the last kind a request's field has
        value = values.topic_id(rng, ctx, destructive)
    return value, f":= {_brief(value)}"


def _new_array(rng: random.Random, items: tuple[Any, ...]) -> tuple[Any, str]:
    roll = rng.random()
    if roll < 0.25 or not items:
        return (), ":= []"
    # Items repeat the few objects an array was built from: the largest of those bounds how
    # many fit MANY_ITEMS_BYTES.
    most = MANY_ITEMS_BYTES // max(_item_size(i) for i in {id(i): i for i in items}.values())
    if roll < 0.5:
        n = min(rng.choice((2, 3, 10)), max(1, most // len(items)))
        return items * n, f"repeated x{n}"
    if roll < 0.65:
        return items[:-1], "last item dropped"
    # Most grown arrays stay short; one in ten fills the frame (tens of thousands of
    # items), where a handler that works item by item on the event loop stalls the node.
    n = min(rng.choice((100, 1000)), most) if rng.random() < 0.9 else most
    n = max(n, 1)
    return (items * (n // len(items) + 1))[:n], f"grown to {n} items"


def _item_size(item: Any) -> int:
    if dataclasses.is_dataclass(item):
        return len(encode(item))
    return len(item) + 2 if isinstance(item, (str, bytes)) else 8  # at least: a varint, int64


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} chars)"


# --- tags ---------------------------------------------------------------------------


def unknown_tags(rng: random.Random, parts: list[Piece]) -> tuple[list[Piece], str] | None:
    """Tagged fields no schema knows added to one tag section (None: the version has none).
    Known tags are small numbers; these are not."""
    sections = [i for i, p in enumerate(parts) if p.role == TAGS]
    if not sections:
        return None
    i = rng.choice(sections)
    count = rng.choice((1, 1, 2, 5))
    extra = b""
    for _ in range(count):
        tag = rng.choice((10, 100, 1000, 2**20, 2**31 - 1))
        size = rng.choice((0, 1, 8, 100, 10_000))
        extra += uvarint(tag) + uvarint(size) + rng.randbytes(size)
    have = read_uvarint(parts[i].data)
    parts = list(parts)
    parts[i] = dataclasses.replace(parts[i], data=uvarint(have + count) + extra)
    return parts, f"{count} unknown tagged field(s) in {parts[i].name or '(top)'}"


# --- pieces -------------------------------------------------------------------------


def mutate_pieces(rng: random.Random, parts: list[Piece]) -> tuple[list[Piece], str]:
    """One piece rewritten as no well-formed request writes it."""
    candidates = [
        i
        for i, p in enumerate(parts)
        if p.role in (LENGTH, COUNT, TAGS)
        or (p.role == VALUE and p.kafka_type in ("string", "bool"))
    ]
    i = rng.choice(candidates)
    piece = parts[i]
    data, note = _rewrite(rng, piece)
    parts = list(parts)
    parts[i] = dataclasses.replace(piece, data=data)
    if piece.role == LENGTH and note.startswith("a string of") and i + 1 < len(parts):
        if parts[i + 1].path == piece.path and parts[i + 1].role == VALUE:
            parts[i + 1] = dataclasses.replace(parts[i + 1], data=b"")  # replaced with it
    return parts, f"{piece.name} {piece.role}: {note}"


def _rewrite(rng: random.Random, piece: Piece) -> tuple[bytes, str]:
    flexible = piece.flexible
    if piece.role == VALUE:
        if piece.kafka_type == "bool":
            byte = rng.choice((2, 0x7F, 0xFF))
            return bytes([byte]), f"bool byte {byte}"
        bad = rng.choice((b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82"))
        return (bad * len(piece.data))[: len(piece.data)], f"bad UTF-8 {bad.hex()}"
    if piece.role == TAGS:
        roll = rng.random()
        have = read_uvarint(piece.data)
        if roll < 0.4:
            return uvarint(have + rng.choice((1, 1000))), "more tagged fields than follow"
        if roll < 0.7:
            data = uvarint(have + 1) + uvarint(50) + uvarint(rng.choice((1 << 20, 2**31))) + b"ab"
            return data, "a tagged field longer than the frame"
        varint = huge_varint(rng)
        return varint, f"tag count varint {varint.hex()}"
    width = 2 if piece.kafka_type == "string" else 4
    roll = rng.random()
    if roll < 0.2 and not piece.nullable:
        return length_bytes(None, flexible, width), "null where the schema allows none"
    if roll < 0.45:
        if flexible:
            varint = huge_varint(rng)
            return varint, f"varint {varint.hex()}"
        huge = 2**15 - 1 if width == 2 else rng.choice((2**31 - 1, 2**30, 1 << 20))
        return struct.pack(">h" if width == 2 else ">i", huge), f"{huge}"
    if roll < 0.6 and not flexible:
        negative = rng.choice((-2, -(2**15))) if width == 2 else rng.choice((-2, -(2**31)))
        return struct.pack(">h" if width == 2 else ">i", negative), f"{negative}"
    if roll < 0.7 and flexible and piece.kafka_type == "string":
        n = rng.choice((32_768, 40_000))
        return length_bytes(n, True, 2) + b"y" * n, f"a string of {n} bytes"
    have = _decoded_length(piece)
    lie = max(0, have + rng.choice((-1, 1, 2, 1000)))
    return length_bytes(lie, flexible, width), f"{lie} where {have} follow"


def _decoded_length(piece: Piece) -> int:
    if piece.flexible:
        return read_uvarint(piece.data) - 1
    return int.from_bytes(piece.data, "big", signed=True)


# --- bytes --------------------------------------------------------------------------


def damage(rng: random.Random, data: bytes, start: int) -> tuple[bytes, str]:
    """One to five edits of `data` at or after `start`."""
    out = bytearray(data)
    notes = []
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        at = rng.randrange(start, len(out)) if len(out) > start else start
        roll = rng.randrange(7)
        if roll == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
            notes.append(f"bit flipped at {at}")
        elif roll == 1:
            del out[at:]
            notes.append(f"cut at {at}")
        elif roll == 2:
            extra = rng.randbytes(rng.randint(1, 64))
            out[at:at] = extra
            notes.append(f"{len(extra)} bytes inserted at {at}")
        elif roll == 3:
            out[at : at + 1] = bytes([rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))])
            notes.append(f"byte at {at} set")
        elif roll == 4:
            value = rng.choice((2**31 - 1, -1, -(2**31), 0, -2, 0xFFFFF))
            out[at : at + 4] = struct.pack(">i", value)
            notes.append(f"int32 {value} at {at}")
        elif roll == 5:
            varint = huge_varint(rng)
            out[at : at + 1] = varint
            notes.append(f"varint {varint.hex()} at {at}")
        else:
            del out[at : at + rng.randint(1, 8)]
            notes.append(f"bytes deleted at {at}")
    return bytes(out), ", ".join(notes)
