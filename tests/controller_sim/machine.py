"""The metadata state machine each simulated node runs over the simulated Raft.

It is the Raft simulator's StateMachine (tests/sim/state_machine.py: a hash chain over the
applied entries, which the Raft checker verifies, invariants (f) and (k)) plus what a
controller node really keeps: a MetadataImage, built by replaying each committed entry's
MetadataRecord (metadata.records.decode) through MetadataDelta, control entries (LeaderChange)
moving only the image's offset and epoch, as metadata/loader.py does.

A snapshot holds both: the Raft simulator's snapshot bytes and the image's records
(MetadataImage.records(), encoded), so that loading one rebuilds the image from the records
alone, as a restarted controller does. Layout, all lengths 4-byte big-endian:
    len(base) base  count  (len(record) record)*count
The image is kept at every offset this incarnation can snapshot at (the Cluster asks for a
snapshot at any offset between the loaded snapshot and what was applied).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import decode, encode
from raft.messages import Entry
from tests.sim.state_machine import StateMachine

_LEN = struct.Struct(">I")


def next_image(image: MetadataImage, entry: Entry) -> MetadataImage:
    """The image after `entry` (the loader's handle_commit for one entry)."""
    delta = MetadataDelta(image)
    if not entry.control:
        delta.replay(decode(entry.data))
    return delta.apply(entry.offset + 1, entry.epoch)


def image_from_records(records: Sequence[bytes], end_offset: int, epoch: int) -> MetadataImage:
    """The image a snapshot's records rebuild (the loader's handle_load_snapshot)."""
    delta = MetadataDelta(EMPTY_IMAGE).replay_all(decode(r) for r in records)
    return delta.apply(end_offset, epoch)


def image_records(image: MetadataImage) -> list[bytes]:
    return [encode(r) for r in image.records()]


def encode_snapshot(base: bytes, records: Sequence[bytes]) -> bytes:
    out = [_LEN.pack(len(base)), base, _LEN.pack(len(records))]
    for record in records:
        out += [_LEN.pack(len(record)), record]
    return b"".join(out)


def decode_snapshot(data: bytes) -> tuple[bytes, list[bytes]]:
    """(the Raft simulator's snapshot bytes, the image's records)."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise ValueError(f"metadata snapshot cut short at byte {pos} of {len(data)}")
        chunk = data[pos : pos + n]
        pos += n
        return chunk

    (base_len,) = _LEN.unpack(take(4))
    base = take(base_len)
    (count,) = _LEN.unpack(take(4))
    records = []
    for _ in range(count):
        (n,) = _LEN.unpack(take(4))
        records.append(take(n))
    if pos != len(data):
        raise ValueError(f"metadata snapshot has {len(data) - pos} trailing bytes")
    return base, records


class MetadataStateMachine(StateMachine):
    def __init__(self) -> None:
        super().__init__()
        # images[i]: the image after every entry below start + i (aligned with `digests`).
        self.images: list[MetadataImage] = [EMPTY_IMAGE]
        self.snapshot_epoch = 0  # the epoch of the loaded snapshot (0: none)

    @property
    def image(self) -> MetadataImage:
        return self.images[-1]

    def load(self, data: bytes) -> None:
        base, records = decode_snapshot(data)
        super().load(base)
        epoch = self.entries[-1].epoch if self.entries else 0
        if self.start == 0:
            epoch = 0
        self.snapshot_epoch = epoch
        self.images = [image_from_records(records, self.start, epoch)]

    def apply(self, entry: Entry) -> None:
        super().apply(entry)
        self.images.append(next_image(self.images[-1], entry))

    def snapshot(self, end_offset: int) -> bytes:
        base = super().snapshot(end_offset)
        image = self.images[end_offset - self.start]
        return encode_snapshot(base, image_records(image))
