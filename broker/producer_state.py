"""Idempotent producers: what each producer last wrote to one partition (after Kafka's
ProducerStateManager). Sans-I/O; works on batch headers only, never on records.

For every producer id the partition remembers its epoch and its last WINDOW_BATCHES (25)
batches (first and last sequence, first and last offset): Kafka's leader remembers 5,
Strom's producer may have 25 of a partition unanswered (strom_api/idempotence.py). A batch
from a producer, appended as leader:
- an older epoch than the one known: INVALID_PRODUCER_EPOCH (a newer instance took over);
- a newer epoch: its first sequence must be 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise);
- a producer the partition has no record of, starting above 0: UNKNOWN_PRODUCER_ID (its
  state expired or was never here; the producer resets, KIP-360);
- the same sequences as one of the remembered batches: a retry of a batch already written,
  answered with that batch's offsets and not written again;
- otherwise its first sequence must follow the last one (wrapping after 2^31 - 1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.
Followers and log recovery replay batches without these checks (`replay`). A snapshot
(bytes with a CRC-32C) taken at an offset lets a restart replay only the log after it.
"""

from __future__ import annotations

import json
import struct
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import crc32c

from storage.config import INT_MAX
from strom_api.error_codes import ErrorCode
from strom_api.idempotence import WINDOW_BATCHES
from strom_api.record_batch import NO_PRODUCER_ID, BatchHeader

BATCHES_REMEMBERED = WINDOW_BATCHES
SNAPSHOT_VERSION = 1


class ProducerStateError(Exception):
    def __init__(self, error_name: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


@dataclass(frozen=True, slots=True)
class BatchRecord:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


_FIELDS = 5  # of a BatchRecord


class RememberedBatches:
    """A producer's last BATCHES_REMEMBERED batches of a partition, oldest first, in one flat
    array of 64-bit integers: 25 BatchRecord objects with their ints took 6.7 KB per
    producer and partition, this about 1.2 KB (less than 5 objects did), and a producer that
    wrote 3 batches holds 3. Read back as BatchRecords."""

    __slots__ = ("_values",)

    def __init__(self, batches: Iterable[BatchRecord] = ()) -> None:
        self._values = array("q")
        for batch in batches:
            self.append(batch)

    def append(self, batch: BatchRecord) -> None:
        values = self._values
        values.extend(
            (
                batch.first_seq,
                batch.last_seq,
                batch.first_offset,
                batch.last_offset,
                batch.max_timestamp,
            )
        )
        if len(values) > BATCHES_REMEMBERED * _FIELDS:
            del values[:_FIELDS]

    def copy(self) -> RememberedBatches:
        copied = RememberedBatches()
        copied._values = array("q", self._values)
        return copied

    def __len__(self) -> int:
        return len(self._values) // _FIELDS

    @property
    def last_seq(self) -> int:
        """The newest batch's last sequence, -1 when none is remembered."""
        values = self._values
        return values[-_FIELDS + 1] if values else -1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RememberedBatches) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"RememberedBatches({list(self)!r})"

    def __iter__(self) -> Iterator[BatchRecord]:
        values = self._values
        for at in range(0, len(values), _FIELDS):
            yield BatchRecord(*values[at : at + _FIELDS])

    def __getitem__(self, index: int) -> BatchRecord:
        count = len(self)
        if not -count <= index < count:
            raise IndexError("no such remembered batch")
        at = (index % count) * _FIELDS
        return BatchRecord(*self._values[at : at + _FIELDS])


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: RememberedBatches = field(default_factory=RememberedBatches)

    @property
    def last_seq(self) -> int:
        return self.batches.last_seq


def _last_seq(header: BatchHeader) -> int:
    """Sequences wrap after Int.MaxValue, as Kafka's DefaultRecordBatch.incrementSequence."""
    return (header.base_sequence + header.last_offset_delta) % (INT_MAX + 1)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> BatchRecord | None:
        """Validates a producer's batch before a leader appends it: None to append it, or
        the original batch when this one is a retry of it (answer with its offsets, write
        nothing). Raises ProducerStateError with Kafka's error name."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        pid, epoch, first = header.producer_id, header.producer_epoch, header.base_sequence
        entry = self.producers.get(pid)
        if entry is None:
            if first != 0:
                raise ProducerStateError(
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                    f"Found no record of producerId={pid} on the broker; its first batch "
                    f"here has sequence {first}, not 0.",
                )
            return None
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Producer {pid}'s epoch {epoch} is older than the current {entry.epoch}.",
            )
        if epoch > entry.epoch:
            if first != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {pid}: {epoch} "
                    f"(request epoch), {first} (seq. number), {entry.epoch} (current epoch).",
                )
            return None
        expected = _next_seq(entry.last_seq)
        if first == expected:
            return None  # the next batch: never written (25 batches span no 2^31 sequences)
        last = _last_seq(header)
        for batch in entry.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        raise ProducerStateError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"Out of order sequence number for producer {pid} at offset "
            f"{header.base_offset}: {first} (incoming seq. number), {expected - 1} "
            "(current end sequence number).",
        )

    def expected_sequence(self, producer_id: int, epoch: int) -> int | None:
        """The first sequence `check` lets the producer's next batch of this epoch carry,
        None when the epoch is fenced."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            return 0
        if epoch < entry.epoch:
            return None
        return _next_seq(entry.last_seq)

    def replay(self, header: BatchHeader) -> None:
        """Records a batch that is in the log (appended as leader, fetched as follower, or
        read back on recovery), with its final offsets."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch < entry.epoch:
            return  # a fenced producer's batch already in the log says nothing new
        entry.batches.append(
            BatchRecord(
                header.base_sequence,
                _last_seq(header),
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def save(self, producer_ids: Iterable[int]) -> dict[int, ProducerEntry | None]:
        """Copies of these producers' entries (None: unknown), for `restore`."""
        saved: dict[int, ProducerEntry | None] = {}
        for pid in producer_ids:
            if pid != NO_PRODUCER_ID and pid not in saved:
                entry = self.producers.get(pid)
                saved[pid] = (
                    None if entry is None else ProducerEntry(entry.epoch, entry.batches.copy())
                )
        return saved

    def restore(self, saved: dict[int, ProducerEntry | None]) -> None:
        """Puts back what `save` copied (an append that did not happen)."""
        for pid, entry in saved.items():
            if entry is None:
                self.producers.pop(pid, None)
            else:
                self.producers[pid] = entry

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forgets producers whose last batch is producer.id.expiration.ms old or older, as
        Kafka's ProducerStateManager.removeExpiredProducers does, so a partition written by
        many short-lived producers does not keep all of them forever. A forgotten producer
        that writes again with a sequence above 0 gets UNKNOWN_PRODUCER_ID and resets
        (KIP-360). Returns how many were forgotten."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.batches and now_ms - entry.batches[-1].max_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def replay_all(self, headers: Iterable[BatchHeader]) -> None:
        for header in headers:
            self.replay(header)

    def truncate_to(self, offset: int) -> None:
        """The log lost everything from `offset` on (a follower truncating): forget those
        batches, and producers left with none."""
        for pid in list(self.producers):
            entry = self.producers[pid]
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self.producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches = RememberedBatches(kept)

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The state as bytes: version, CRC-32C, then JSON (at most 25 batches a producer)."""
        body = json.dumps(
            {
                str(pid): [e.epoch, [list(_astuple(b)) for b in e.batches]]
                for pid, e in sorted(self.producers.items())
            },
            separators=(",", ":"),
        ).encode()
        return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(body)) + body

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        if len(data) < 6:
            raise ValueError("producer state snapshot is cut short")
        version, crc = struct.unpack_from(">hI", data)
        body = data[6:]
        if version != SNAPSHOT_VERSION or crc32c.crc32c(body) != crc:
            raise ValueError("producer state snapshot is damaged (version or CRC-32C)")
        manager = cls()
        for pid, (epoch, batches) in json.loads(body).items():
            entry = ProducerEntry(epoch)
            for b in batches:
                entry.batches.append(BatchRecord(*b))
            manager.producers[int(pid)] = entry
        return manager


def _astuple(b: BatchRecord) -> tuple[int, int, int, int, int]:
    return (b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp)
