"""The state machine each simulated node runs, and the snapshots it writes.

Its state after applying the entries below offset `n` is the pair (n, digest of those
entries), where the digest is a hash chain over (offset, epoch, data, control) of each
entry: two states are equal exactly when they applied the same committed prefix, which is
what lets the checker verify a snapshot against `committed[:end_offset]` (invariant (k)).
A snapshot is the deterministic repr of (end offset, digest, the last TAIL entries below the
end): the digest makes it checkable in full, the tail makes it long enough (a few hundred
bytes) that a small `fetch_snapshot_max_bytes` splits its download into several chunks, and
readable in a trace. The whole list of entries would be checkable too, but grows with the
run until a chunked download no longer finishes between two compactions.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence

from raft.messages import Entry

TAIL = 8
EMPTY = b""  # the digest of no entries


def chain(digest: bytes, entry: Entry) -> bytes:
    """The digest after applying `entry` to a state with `digest`."""
    fields = repr((entry.offset, entry.epoch, entry.data, entry.control)).encode()
    return hashlib.blake2b(digest + fields, digest_size=16).digest()


def encode_snapshot(end_offset: int, digest: bytes, tail: Sequence[Entry]) -> bytes:
    """The bytes of the snapshot at `end_offset`; `tail` is the last TAIL entries below it."""
    entries = [(e.offset, e.epoch, e.data, e.control) for e in tail]
    return repr((end_offset, digest.hex(), entries)).encode()


class StateMachine:
    """What one incarnation of a node applied: the snapshot it loaded, then entries."""

    def __init__(self) -> None:
        self.start = 0  # end offset of the loaded snapshot (0: none)
        # digests[i]: the state after applying every entry below start + i.
        self.digests = [EMPTY]
        # The loaded snapshot's tail, then every entry applied since: the tail of a snapshot
        # taken below `applied` comes from here.
        self.entries: list[Entry] = []

    @property
    def applied(self) -> int:
        """The next offset to apply."""
        return self.start + len(self.digests) - 1

    @property
    def digest(self) -> bytes:
        return self.digests[-1]

    def load(self, data: bytes) -> None:
        """Replaces the state with a snapshot's."""
        end, digest, tail = ast.literal_eval(data.decode())
        self.start = end
        self.digests = [bytes.fromhex(digest)]
        self.entries = [Entry(*fields) for fields in tail]

    def apply(self, entry: Entry) -> None:
        self.digests.append(chain(self.digests[-1], entry))
        self.entries.append(entry)

    def snapshot(self, end_offset: int) -> bytes:
        """A snapshot of the state after applying every entry below `end_offset`, which
        must lie in [start, applied]."""
        if not self.start <= end_offset <= self.applied:
            raise ValueError(f"no state at {end_offset}: have {self.start}..{self.applied}")
        below = len(self.entries) - (self.applied - end_offset)
        tail = self.entries[max(0, below - TAIL) : below]
        return encode_snapshot(end_offset, self.digests[end_offset - self.start], tail)
