"""The metadata log's listener: keeps the latest image on every node and tells who cares.

Controllers (active and standby) and brokers each run one MetadataLoader as their Raft
listener. Committed entries are replayed, in log order, into a MetadataDelta on the current
image; a snapshot replaces the image outright (a node far behind, or a restart). Each new
image is handed to the publishers with the delta that made it, which is what a broker acts
on (Kafka's MetadataLoader and MetadataPublisher).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import decode, encode
from raft.messages import NO_LEADER, Entry, LeaderAndEpoch, SnapshotId

Publisher = Callable[[MetadataDelta, MetadataImage], None]


class MetadataLoader:
    def __init__(self) -> None:
        self.image = EMPTY_IMAGE
        self.leader = LeaderAndEpoch(NO_LEADER, 0)
        self.publishers: list[Publisher] = []
        self.leader_listeners: list[Callable[[LeaderAndEpoch], None]] = []
        self.bytes_since_snapshot = 0
        # True until a metadata record was committed or a snapshot loaded (Kafka's
        # LogReplayTracker.empty()): only then may a controller write its bootstrap records.
        self.log_empty = True

    # --- raft.driver.RaftListener -------------------------------------------------------------

    def handle_commit(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        delta = MetadataDelta(self.image)
        for entry in entries:
            if not entry.control:  # Raft's own LeaderChange records hold no metadata
                delta.replay(decode(entry.data))
                self.log_empty = False
                self.bytes_since_snapshot += len(entry.data)
        last = entries[-1]
        self._publish(delta, delta.apply(last.offset + 1, last.epoch))

    def handle_load_snapshot(self, snapshot_id: SnapshotId, records: Sequence[bytes]) -> None:
        delta = MetadataDelta(EMPTY_IMAGE).replay_all(decode(r) for r in records)
        self.bytes_since_snapshot = 0
        self.log_empty = False  # snapshots are taken only after records were written
        self._publish(delta, delta.apply(snapshot_id.end_offset, snapshot_id.epoch))

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        for listener in self.leader_listeners:
            listener(leader)

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot(self) -> tuple[int, list[bytes]]:
        """(end offset, records) of a snapshot of the current image."""
        self.bytes_since_snapshot = 0
        return self.image.offset, [encode(r) for r in self.image.records()]

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        for publisher in self.publishers:
            publisher(delta, image)
