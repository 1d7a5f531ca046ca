"""Kafka request frames from kio's schemas, as pieces that a mutation rewrites one at a time.

kio's writer encodes a request in one go. The fuzzer needs to lie in one place (a count, a
length, a null where none may be, a tag nobody knows) and leave the rest well-formed, so it
encodes with this walk of the same schemas, which keeps each length, count, value and tag
count apart, named by its field's path. test_kafka_fuzz.py checks that the pieces joined
are the bytes kio writes, for every served API and version.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from dataclasses import MISSING, dataclass, fields
from typing import Any

from kio.index import load_request_schema
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

# What a piece is: a value's bytes, the length before a string's or bytes' value, the count
# before an array's items, or the count of tagged fields that ends a flexible struct.
VALUE, LENGTH, COUNT, TAGS = "value", "length", "count", "tags"

FIXED = {
    "bool": ">?",
    "int8": ">b",
    "int16": ">h",
    "int32": ">i",
    "int64": ">q",
    "timedelta_i32": ">i",
    "timedelta_i64": ">q",
}
SIZE = struct.Struct(">i")

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Piece:
    path: Path
    role: str  # VALUE, LENGTH, COUNT or TAGS
    kafka_type: str  # of the field ("array" for a COUNT, "" for TAGS)
    flexible: bool  # compact lengths and counts (unsigned varints, +1) rather than int16/32
    nullable: bool
    data: bytes

    @property
    def name(self) -> str:
        return "/".join(str(p) for p in self.path) or "(body)"


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes) -> int:
    value = 0
    for i, byte in enumerate(data):
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            break
    return value


def length_bytes(length: int | None, flexible: bool, width: int) -> bytes:
    """A length or count as written before its value (None: null); `width`, 2 or 4, is the
    legacy encoding's."""
    if flexible:
        return uvarint(0 if length is None else length + 1)
    return (
        struct.pack(">h", -1 if length is None else length)
        if width == 2
        else SIZE.pack(-1 if length is None else length)
    )


def millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return value


def header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> Any:
    """The kio request header of that API and version (v1, or v2 for flexible ones)."""
    header_type = load_request_schema(api_key, version).__header_schema__
    return header_type(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )


def pieces(entity: Any, path: Path = (), memo: dict[int, bytes] | None = None) -> list[Piece]:
    """The pieces of a kio request (or request header) in the order they are written.
    With `memo`, an array's items are one piece, each distinct item encoded once (encode)."""
    out: list[Piece] = []
    entity_type = type(entity)
    flexible = bool(entity_type.__flexible__)
    is_header = entity_type.__name__ == "RequestHeader"
    tagged = []
    for f in fields(entity_type):
        tag = get_field_tag(f)
        value = getattr(entity, f.name)
        if tag is not None:
            default = f.default if f.default is not MISSING else get_tagged_field_default(f)
            if value != default:
                tagged.append((int(tag), f, value))
            continue
        # Kafka's RequestHeader writes client_id as a legacy string even in v2.
        field_flexible = flexible and not (is_header and f.name == "client_id")
        _field(out, f, value, path + (f.name,), field_flexible, is_optional(f), memo)
    if flexible:
        out.append(Piece(path, TAGS, "", True, False, uvarint(len(tagged))))
        for tag, f, value in sorted(tagged, key=lambda t: t[0]):
            inner: list[Piece] = []
            _field(inner, f, value, path + (f.name,), True, False, memo)
            data = join(inner)
            out.append(
                Piece(
                    path + (f.name,),
                    VALUE,
                    "tagged",
                    True,
                    False,
                    uvarint(tag) + uvarint(len(data)) + data,
                )
            )
    return out


def encode(entity: Any) -> bytes:
    """The bytes of pieces(entity) joined, quicker for an array grown by repeating items."""
    return join(pieces(entity, memo={}))


def _field(
    out: list[Piece],
    f: Any,
    value: Any,
    path: Path,
    flexible: bool,
    nullable: bool,
    memo: dict[int, bytes] | None,
) -> None:
    shape = classify_field(f)
    if isinstance(shape, (EntityTupleField, PrimitiveTupleField)):
        count = None if value is None else len(value)
        out.append(
            Piece(path, COUNT, "array", flexible, nullable, length_bytes(count, flexible, 4))
        )
        if memo is not None:
            data = b"".join(_item(shape, f, item, path, flexible, memo) for item in value or ())
            out.append(Piece(path, VALUE, "items", flexible, False, data))
            return
        for i, item in enumerate(value or ()):
            if isinstance(shape, EntityTupleField):
                out += pieces(item, path + (i,))
            else:
                _primitive(out, f.metadata["kafka_type"], item, path + (i,), flexible, False)
    elif isinstance(shape, EntityField):
        out += pieces(value, path, memo)
    else:
        _primitive(out, f.metadata["kafka_type"], value, path, flexible, nullable)


def _item(
    shape: Any, f: Any, item: Any, path: Path, flexible: bool, memo: dict[int, bytes]
) -> bytes:
    """An array item's bytes, each distinct item (object) encoded once."""
    known = memo.get(id(item))
    if known is None:
        one: list[Piece] = []
        if isinstance(shape, EntityTupleField):
            one = pieces(item, path, memo)
        else:
            _primitive(one, f.metadata["kafka_type"], item, path, flexible, False)
        known = memo[id(item)] = join(one)
    return known


def _primitive(
    out: list[Piece], kafka_type: str, value: Any, path: Path, flexible: bool, nullable: bool
) -> None:
    if kafka_type in FIXED:
        if kafka_type.startswith("timedelta"):
            value = millis(value)
        out.append(
            Piece(
                path, VALUE, kafka_type, flexible, nullable, struct.pack(FIXED[kafka_type], value)
            )
        )
    elif kafka_type == "uuid":
        out.append(
            Piece(path, VALUE, kafka_type, flexible, nullable, (value or uuid.UUID(int=0)).bytes)
        )
    else:  # string, bytes, records
        data = None if value is None else value.encode() if isinstance(value, str) else bytes(value)
        width = 2 if kafka_type == "string" else 4
        out.append(
            Piece(
                path,
                LENGTH,
                kafka_type,
                flexible,
                nullable,
                length_bytes(None if data is None else len(data), flexible, width),
            )
        )
        if data:
            out.append(Piece(path, VALUE, kafka_type, flexible, nullable, data))


def join(parts: list[Piece]) -> bytes:
    return b"".join(p.data for p in parts)


def framed(data: bytes) -> bytes:
    """`data` behind its int32 size: one frame."""
    return SIZE.pack(len(data)) + data
