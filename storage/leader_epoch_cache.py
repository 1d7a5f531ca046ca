"""Leader epoch → start offset, per partition (Kafka's LeaderEpochFileCache). Not thread-safe.

Entry (epoch, start_offset): the first offset a leader of that epoch wrote. Epochs and start
offsets both strictly rise. A follower asks "where does epoch E end?" (KIP-101/279) and
truncates its log to the answer instead of to the high watermark, which is what keeps a
replica from keeping records the new leader never had. Persisted in the partition directory
as `leader-epoch-checkpoint` (Kafka's format) on every change.
"""

from __future__ import annotations

import os

from storage.checkpoint import read_int_entries, write_lines

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.entries: list[tuple[int, int]] = [
            (int(e), int(o)) for e, o in read_int_entries(self.path, 2, 2)
        ]

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that `epoch` starts at `start_offset`; a stale or repeated epoch is ignored.

        An entry with a start offset at or above the new one cannot stand (its offsets now
        belong to the new epoch), so it is dropped, as Kafka does."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        kept = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries = kept + [(epoch, start_offset)]
        self._persist()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) — the answer to OffsetsForLeaderEpoch, as Kafka's
        LeaderEpochFileCache.endOffsetFor gives it:
          - the latest epoch ends at the log end offset;
          - an older epoch ends where the next higher epoch starts, and is answered with the
            largest epoch at or below it (the requested one itself when none is lower);
          - an epoch above the latest, or an undefined one, is unknown: (-1, -1)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = [e for e, _ in self.entries if e <= epoch]
        return (floor[-1] if floor else epoch), higher[1]

    def epoch_for_offset(self, offset: int) -> int:
        found = UNDEFINED_EPOCH
        for e, o in self.entries:
            if o > offset:
                break
            found = e
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Drops epochs that start at or after `end_offset` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch covering it starts there."""
        kept = [(e, o) for e, o in self.entries if o >= start_offset]
        earlier = [(e, o) for e, o in self.entries if o < start_offset]
        if earlier and (not kept or kept[0][1] > start_offset):
            kept.insert(0, (earlier[-1][0], start_offset))
        if kept != self.entries:
            self.entries = kept
            self._persist()

    def clear(self) -> None:
        self.entries = []
        self._persist()

    def _persist(self) -> None:
        write_lines(self.path, list(self.entries))
