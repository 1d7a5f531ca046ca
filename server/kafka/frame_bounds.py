"""A request body's lengths and counts, checked against the frame before kio reads it.

kio's reader (native code) reserves room for an array from its declared count before it
reads an element: a 20-byte Metadata request declaring 2^35 topics made it ask for 274 GB,
and the allocation failure aborted the node (SIGABRT), before any login. Kafka's generated
parsers refuse such a request instead ("Tried to allocate a collection of size N, but
there are only M bytes remaining."), and so does this walk, which mirrors their other
checks on the way (a null where the field is not nullable, a string longer than 32,767
bytes, a varint of more than 5 bytes, a length past the frame's end). It reads only
lengths and counts, skipping values by their size: about a microsecond per field.

A tagged field kio knows is walked as its field, within the size its tag declares. One it
does not know is cut out of the frame before kio reads it, as Kafka's parsers skip unknown
tags (KIP-482: a newer client may send a tag this version of the schema lacks); kio would
raise. A millisecond count beyond what kio reads into a timedelta is cut to the largest it
does (Kafka takes any int64).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

MAX_STRING_BYTES = 32_767  # Kafka's: a string's length is an int16, compact or not

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_STRING, _BYTES, _ENTITY = "string", "bytes", "entity"
_TIMEDELTA_I64 = "timedelta_i64"
# kio's reader makes a timedelta from the microseconds in an int64: +-292,471 years.
_MAX_MILLISECONDS = (2**63 - 1) // 1000


class FrameBoundsError(ValueError):
    """The body declares something the frame cannot hold, or Kafka's parsers refuse."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str  # a _FIXED key, _STRING, _BYTES or _ENTITY
    array: bool
    nullable: bool
    entity: Any  # the nested entity type, for _ENTITY


# (flexible, the untagged fields in order, the tagged fields kio knows by tag)
_Plan = tuple[bool, tuple[_Field, ...], dict[int, _Field]]
_plans: dict[type, _Plan] = {}


def _plan(entity_type: Any) -> _Plan:
    plan = _plans.get(entity_type)
    if plan is None:
        planned = []
        tagged = {}
        for f in fields(entity_type):
            shape = classify_field(f)
            if isinstance(shape, (EntityField, EntityTupleField)):
                kind, nested = _ENTITY, shape.type_
            else:
                kafka_type = f.metadata["kafka_type"]
                kind = _BYTES if kafka_type in ("bytes", "records") else kafka_type
                nested = None
                if kind not in _FIXED and kind not in (_STRING, _BYTES):
                    raise TypeError(f"{entity_type.__name__}.{f.name}: kafka type {kafka_type}")
            array = isinstance(shape, (EntityTupleField, PrimitiveTupleField))
            field = _Field(f.name, kind, array, is_optional(f), nested)
            tag = get_field_tag(f)
            if tag is None:
                planned.append(field)
            else:
                tagged[int(tag)] = field  # in the tagged section, walked within its size
        flexible = bool(entity_type.__flexible__)
        plan = _plans[entity_type] = (flexible, tuple(planned), tagged)
    return plan


def check_body(entity_type: type, frame: bytes, offset: int) -> bytes:
    """`frame`, or a copy without the tagged fields kio does not know; raises
    FrameBoundsError where `frame[offset:]` cannot be a body of `entity_type`."""
    walk = _Walk(frame)
    walk.entity(entity_type, offset)
    return _cut(frame, walk.cuts)


def check_header(frame: bytes) -> bytes:
    """A v2 request header (flexible requests): `frame`, or a copy without its tagged
    fields, none of which kio knows (Kafka skips them, KIP-482). Its client_id is a legacy
    nullable string even here, as in Kafka's RequestHeader."""
    walk = _Walk(frame)
    pos = 8  # api key, version, correlation id
    if pos + 2 > walk.end:
        raise FrameBoundsError("the frame ends inside the request header")
    pos += 2 + max(int.from_bytes(frame[pos : pos + 2], "big", signed=True), 0)
    if pos > walk.end:
        raise FrameBoundsError("the frame ends inside the request header's client_id")
    walk._tagged(pos, {})
    return _cut(frame, walk.cuts)


def _cut(frame: bytes, cuts: list[tuple[int, int, bytes]]) -> bytes:
    if not cuts:
        return frame
    pieces: list[bytes] = []
    at = 0
    for start, end, instead in cuts:
        pieces += (frame[at:start], instead)
        at = end
    pieces.append(frame[at:])
    return b"".join(pieces)


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Walk:
    __slots__ = ("frame", "end", "cuts")

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.end = len(frame)
        self.cuts: list[tuple[int, int, bytes]] = []  # (start, end, replacement), in order

    def entity(self, entity_type: type, pos: int) -> int:
        flexible, planned, tagged = _plan(entity_type)
        for field in planned:
            pos = self._field(field, flexible, pos)
        if flexible:
            pos = self._tagged(pos, tagged)
        return pos

    def _field(self, field: _Field, flexible: bool, pos: int) -> int:
        if not field.array:
            return self._value(field, flexible, pos)
        count, pos = self._length(pos, flexible, field, "array")
        if count < 0:
            return pos
        if count > self.end - pos:
            raise FrameBoundsError(
                f"Tried to allocate a collection of size {count} for {field.name}, "
                f"but there are only {self.end - pos} bytes remaining."
            )
        for _ in range(count):
            pos = self._value(field, flexible, pos)
        return pos

    def _value(self, field: _Field, flexible: bool, pos: int) -> int:
        kind = field.kind
        size = _FIXED.get(kind)
        if size is not None:
            if kind == _TIMEDELTA_I64 and pos + size <= self.end:
                self._clamp_milliseconds(pos)
            pos += size
        elif kind == _ENTITY:
            return self.entity(field.entity, pos)
        else:
            length, pos = self._length(pos, flexible, field, kind)
            if length > 0:
                if kind == _STRING and length > MAX_STRING_BYTES:
                    raise FrameBoundsError(f"string field {field.name} had invalid length {length}")
                pos += length
        if pos > self.end:
            raise FrameBoundsError(f"the frame ends inside field {field.name}")
        return pos

    def _clamp_milliseconds(self, pos: int) -> None:
        """An int64 of milliseconds that kio reads as a timedelta: Kafka takes any int64
        (OffsetCommit v2-4's retention_time), kio's read takes +-2^63 microseconds, and
        beyond them it raised (the connection closed, the request unanswered). Such a value
        is cut to the nearest kio takes: a duration of 292,471 years."""
        value = int.from_bytes(self.frame[pos : pos + 8], "big", signed=True)
        clamped = max(min(value, _MAX_MILLISECONDS), -_MAX_MILLISECONDS)
        if clamped != value:
            self.cuts.append((pos, pos + 8, clamped.to_bytes(8, "big", signed=True)))

    def _length(self, pos: int, flexible: bool, field: _Field, what: str) -> tuple[int, int]:
        """A length or count (-1: null), and the position after it."""
        frame = self.frame
        if flexible:
            encoded, pos = self._uvarint(pos)
            length = encoded - 1
        else:
            width = 2 if what == _STRING else 4
            if pos + width > self.end:
                raise FrameBoundsError(f"the frame ends inside field {field.name}")
            length = int.from_bytes(frame[pos : pos + width], "big", signed=True)
            pos += width
            if length < -1:
                raise FrameBoundsError(f"{what} field {field.name} had invalid length {length}")
        if length == -1 and not field.nullable:
            raise FrameBoundsError(f"non-nullable field {field.name} was serialized as null")
        return length, pos

    def _uvarint(self, pos: int) -> tuple[int, int]:
        frame, value = self.frame, 0
        for i in range(5):
            if pos >= self.end:
                raise FrameBoundsError("the frame ends inside a varint")
            byte = frame[pos]
            pos += 1
            value |= (byte & 0x7F) << (7 * i)
            if byte < 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value, pos
        raise FrameBoundsError("a varint is longer than 5 bytes or above 2^32 - 1")

    def _tagged(self, pos: int, known: dict[int, _Field]) -> int:
        """The tagged section: a tag kio knows is walked as its field (so its strings and
        counts are bounded as the untagged fields' are, and must end within the size it
        declares), one it does not know is cut out."""
        start = pos
        count, pos = self._uvarint(pos)
        if count > self.end - pos:
            raise FrameBoundsError(
                f"{count} tagged fields declared, but there are only {self.end - pos} bytes "
                "remaining."
            )
        counted_to = pos
        unknown = []
        for _ in range(count):
            field_start = pos
            tag, pos = self._uvarint(pos)
            size, pos = self._uvarint(pos)
            value_start, pos = pos, pos + size
            if pos > self.end:
                raise FrameBoundsError("the frame ends inside a tagged field")
            field = known.get(tag)
            if field is None:
                unknown.append((field_start, pos, b""))
                continue
            cuts = len(self.cuts)
            if self._field(field, True, value_start) > pos:
                raise FrameBoundsError(f"tagged field {field.name} runs past its size {size}")
            del self.cuts[cuts:]  # tags unknown inside it stay: kio refuses them, its size holds
        if unknown:
            self.cuts.append((start, counted_to, _uvarint_bytes(count - len(unknown))))
            self.cuts += unknown
        return pos
