"""Kafka's request and response frames, sans-I/O (the connection reads and writes them).

A frame is an int32 size, then that many bytes: the request header (v1, or v2 for an
API's flexible versions: api key, api version, correlation id, client id, tagged fields),
then the request body of that API and version. A response frame is the size, the response
header (v0: the correlation id; v1 adds tagged fields; an ApiVersions response always has
v0, so a client that sent a version the broker does not know can read it), then the body.

What is refused, and how, is Kafka's (SocketServer and RequestContext):
- an API key Kafka does not have, or an API or version the listener does not serve
  (apis.SERVED): InvalidRequest, the connection is closed ("Unknown API key", "Received
  request api key ... which is not enabled");
- an ApiVersions request of a version newer than served: answered, not refused, with
  UNSUPPORTED_VERSION in an ApiVersions v0 response carrying the served ranges (KIP-511),
  its body not read;
- a header or body that does not decode: InvalidRequest. Bytes left after the body are
  ignored, as Kafka ignores them.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema
from kio.schema.index import api_key_map
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityTupleField, classify_field
from kio.serial.errors import DecodeError

from server.kafka.apis import API_VERSIONS, SERVED
from server.kafka.frame_bounds import MAX_STRING_BYTES, FrameBoundsError, check_body, check_header

SIZE = struct.Struct(">i")
_KEY_AND_VERSION = struct.Struct(">hh")


class InvalidRequest(Exception):
    """A request this listener refuses by closing the connection; the message says why."""


@dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # kio's request of that API and version


@dataclass(frozen=True)
class UnsupportedApiVersions:
    """An ApiVersions request newer than served: answered in v0 (KIP-511)."""

    api_version: int
    correlation_id: int


def api_name(key: int) -> str:
    """Kafka's name of an API key, as its enum spells it (PRODUCE, METADATA, ...)."""
    return api_key_map[key].upper()


def parse_request(frame: bytes) -> Request | UnsupportedApiVersions:
    if len(frame) < _KEY_AND_VERSION.size:
        raise InvalidRequest(f"a request of {len(frame)} bytes is shorter than its header")
    key, version = _KEY_AND_VERSION.unpack_from(frame)
    api = SERVED.get(key)
    if key == API_VERSIONS and api is not None and version > api.max_version:
        header, _ = _read(RequestHeaderV2, frame, 0, "request header")
        return UnsupportedApiVersions(version, header.correlation_id)
    if key not in api_key_map:
        raise InvalidRequest(f"Unknown API key {key}")
    if api is None or not api.serves(version):
        raise InvalidRequest(
            f"Received request api key {api_name(key)} with version {version} which is not enabled"
        )
    request_type = load_request_schema(key, version)
    if request_type.__header_schema__.__flexible__:
        try:
            frame = check_header(frame)
        except FrameBoundsError as exc:
            raise InvalidRequest(f"the request header does not decode: {exc}") from None
    header, header_size = _read(request_type.__header_schema__, frame, 0, "request header")
    # Bytes after the body are ignored, as Kafka's generated parsers ignore them (they read
    # the fields and never check what remains): librdkafka 2.16 sends 3 more after a
    # Metadata v13 request for every topic.
    what = f"{api.name} v{version} request"
    try:
        frame = check_body(request_type, frame, header_size)  # before kio reserves anything
    except FrameBoundsError as exc:
        raise InvalidRequest(f"the {what} does not decode: {exc}") from None
    body, _ = _read(request_type, frame, header_size, what)
    return Request(key, version, header.correlation_id, header.client_id, body)


def _read(entity_type: type[Any], frame: bytes, offset: int, what: str) -> tuple[Any, int]:
    try:
        value, size = entity_reader(entity_type)(frame, offset)
    # kio's errors, bad UTF-8, and KeyError for a tagged field it does not know in a request
    # header (frame_bounds cuts those out of a body, as Kafka skips them: KIP-482).
    except (DecodeError, ValueError, OverflowError, KeyError) as exc:
        raise InvalidRequest(f"the {what} does not decode: {type(exc).__name__}: {exc}") from None
    return value, size


def fitted(entity: Any) -> Any:
    """`entity` with every error message over a string's 32,767 bytes cut to fit (a message
    quoting a 32,767-byte topic name is longer: its response could not be encoded)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, str) and f.name.endswith("message"):
            data = value.encode()
            if len(data) > MAX_STRING_BYTES:
                changes[f.name] = data[: MAX_STRING_BYTES - 3].decode(errors="ignore") + "..."
        elif dataclasses.is_dataclass(value):
            if (inner := fitted(value)) is not value:
                changes[f.name] = inner
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            items = tuple(fitted(v) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return dataclasses.replace(entity, **changes) if changes else entity


def holds_many(entity: Any, limit: int) -> bool:
    """Whether `entity`'s arrays of entities hold `limit` items or more, counted down to
    every level and stopped at `limit`, so a small response costs a few attribute reads.
    kio encodes about 14 us per item: a Metadata answer of 112,500 topics held the loop 1.6 s
    from a request under a megabyte."""
    pending = [entity]
    count = 0
    while pending:
        item = pending.pop()
        for name in _entity_arrays(type(item)):
            values = getattr(item, name)
            if values is None:  # a nullable array, null
                continue
            count += len(values)
            if count >= limit:
                return True
            pending += values
    return False


_arrays: dict[type, tuple[str, ...]] = {}


def _entity_arrays(entity_type: type) -> tuple[str, ...]:
    """The fields of `entity_type` that hold tuples of entities."""
    names = _arrays.get(entity_type)
    if names is None:
        names = _arrays[entity_type] = tuple(
            f.name
            for f in dataclasses.fields(entity_type)
            if isinstance(classify_field(f), EntityTupleField)
        )
    return names


def response_frame(correlation_id: int, response: Any) -> bytes:
    """The size-prefixed frame of a response (kio message) to the request of that id."""
    header_type = type(response).__header_schema__
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_type)(out, header_type(correlation_id=correlation_id))
    entity_writer(type(response))(out, response)
    data = out.getbuffer()
    SIZE.pack_into(data, 0, len(data) - SIZE.size)
    del data
    return out.getvalue()
