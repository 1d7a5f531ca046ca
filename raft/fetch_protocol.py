"""The pull-based fetch protocol of KIP-595, both sides, with FetchSnapshot (KIP-630).

Followers and observers send Fetch with their log end offset and the epoch of their last
entry; the leader answers with entries and its high watermark, or with the point where the
follower's log diverges from its own (DivergingEpoch: the follower truncates there and
fetches again), or holds the fetch (long poll) until there is something new. When the
entries asked for are gone from the leader's log (they are in a snapshot), it answers with
the id of its latest snapshot instead: the follower downloads it in chunks (FetchSnapshot),
makes it durable, restarts its log at the snapshot's end, has its state machine load it,
and goes on fetching from there.
"""

from __future__ import annotations

from raft.messages import (
    FENCED_LEADER_EPOCH,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    POSITION_OUT_OF_RANGE,
    SNAPSHOT_NOT_FOUND,
    UNKNOWN_LEADER_EPOCH,
    DivergingEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotChunk,
    SnapshotId,
    SnapshotRead,
)
from raft.node_state import NodeState
from raft.roles import Role


class FetchProtocol(NodeState):
    # --- the fetch protocol: leader side -------------------------------------------------

    def _handle_fetch_request(self, request: FetchRequest) -> None:
        if request.epoch < self.epoch:
            self._reply_fetch_error(request, FENCED_LEADER_EPOCH)
            return
        if request.epoch > self.epoch:
            # Only an observer's fetch gets here (a voter's moved our epoch first): we have
            # not reached its epoch, and an observer's word never moves it (Kafka's
            # validateLeaderOnlyRequest).
            self._reply_fetch_error(request, UNKNOWN_LEADER_EPOCH)
            return
        if self.role is not Role.LEADER or self.leader is None:
            self._reply_fetch_error(request, NOT_LEADER_OR_FOLLOWER)
            return
        snapshot = self._snapshot_needed(request.fetch_offset, request.last_fetched_epoch)
        if snapshot is not None:
            self.parked.pop(request.src, None)
            self.leader.record_alive(request.src, self.now_ms)
            self._send(self._fetch_response(request, (), snapshot_id=snapshot))
            return
        diverging = self._diverging(request)
        if diverging is not None:
            self._send(self._fetch_response(request, (), diverging))
            return
        self.parked.pop(request.src, None)
        self.leader.record_fetch(
            request.src, request.fetch_offset, self.now_ms, self.log.end_offset()
        )
        moved = self._update_leader_high_watermark()  # answers the parked fetches if it moved
        fetcher_behind = request.high_watermark < self.leader.high_watermark
        if not moved and not fetcher_behind and request.fetch_offset >= self.log.end_offset():
            # Long poll: nothing new for it (no entries, and it knows our high watermark);
            # hold the fetch until there is data or a new high watermark, or the wait runs out.
            self.parked[request.src] = (request, self.now_ms + self.config.long_poll_ms)
            return
        self._answer_fetch(request)

    def _expire_parked_fetches(self, now: int) -> None:
        """Answers the long-polled fetches whose wait ran out (empty, with the high mark)."""
        for replica, (request, deadline) in list(self.parked.items()):
            if now >= deadline:
                del self.parked[replica]
                self._answer_fetch(request)

    def _snapshot_needed(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """The snapshot a fetcher must download first, if its log cannot continue from ours
        (Kafka's validateOffsetAndEpoch): it asks for entries below our log start, or its
        last epoch is older than the snapshot at our log start (its log diverges inside
        what that snapshot holds)."""
        start = self.log.start()
        if start.end_offset == 0:
            return None
        if (
            fetch_offset < start.end_offset
            or (fetch_offset == start.end_offset and last_fetched_epoch != start.epoch)
            or last_fetched_epoch < start.epoch
        ):
            latest = self.snapshots.latest()
            if latest is None:
                raise AssertionError(f"node {self.node_id}: the log starts at {start}, no snapshot")
            return latest
        return None

    def _diverging(self, request: FetchRequest) -> DivergingEpoch | None:
        if request.fetch_offset == 0 and request.last_fetched_epoch == 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch != request.last_fetched_epoch or end < request.fetch_offset:
            return DivergingEpoch(epoch, end)
        return None

    def _answer_fetch(self, request: FetchRequest) -> None:
        self.fetches_served += 1
        count = min(request.max_entries, self.config.fetch_max_entries)
        self._send_with_entries(self._fetch_response(request, ()), request.fetch_offset, count)

    def _fetch_response(
        self,
        request: FetchRequest,
        entries: tuple[Entry, ...],
        diverging: DivergingEpoch | None = None,
        snapshot_id: SnapshotId | None = None,
    ) -> FetchResponse:
        assert self.leader is not None
        return FetchResponse(
            self.node_id,
            request.src,
            self.epoch,
            self.node_id,
            self.leader.high_watermark,
            entries,
            diverging,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
            snapshot_id=snapshot_id,
        )

    def _handle_fetch_snapshot_request(self, request: FetchSnapshotRequest) -> None:
        if request.epoch < self.epoch:
            self._reply_fetch_snapshot_error(request, FENCED_LEADER_EPOCH)
            return
        if request.epoch > self.epoch:  # an observer's, as in _handle_fetch_request
            self._reply_fetch_snapshot_error(request, UNKNOWN_LEADER_EPOCH)
            return
        if self.role is not Role.LEADER or self.leader is None:
            self._reply_fetch_snapshot_error(request, NOT_LEADER_OR_FOLLOWER)
            return
        self.leader.record_alive(request.src, self.now_ms)
        size = self.snapshots.size(request.snapshot_id)
        if size is None:
            # Deleted since (a newer one took its place): the follower fetches again and
            # learns the newer one.
            self._reply_fetch_snapshot_error(request, SNAPSHOT_NOT_FOUND)
            return
        if not 0 <= request.position < max(size, 1):
            self._reply_fetch_snapshot_error(request, POSITION_OUT_OF_RANGE)
            return
        max_bytes = max(1, min(request.max_bytes, self.config.fetch_snapshot_max_bytes))
        # The chunk itself is read by the driver, with the Ready (step() reads no file).
        self._send_with_snapshot_data(
            FetchSnapshotResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.node_id,
                request.snapshot_id,
                request.position,
                size,
            ),
            SnapshotRead(-1, request.snapshot_id, request.position, max_bytes),
        )

    def _reply_fetch_snapshot_error(self, request: FetchSnapshotRequest, error: str) -> None:
        self._send(
            FetchSnapshotResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                request.snapshot_id,
                request.position,
                error=error,
            )
        )

    def _update_leader_high_watermark(self) -> bool:
        """Recomputes the leader's high watermark; when it moves, the parked fetches are
        answered so followers learn it at once. Returns whether it moved."""
        assert self.leader is not None
        if not self.leader.update_high_watermark(self.flushed_end):
            return False
        self.high_watermark = self.leader.high_watermark
        self._answer_parked_fetches()
        return True

    def _answer_parked_fetches(self) -> None:
        for replica in list(self.parked):
            request, _ = self.parked.pop(replica)
            self._answer_fetch(request)

    def _reply_fetch_error(self, request: FetchRequest, error: str) -> None:
        self._send(
            FetchResponse(
                self.node_id,
                request.src,
                self.epoch,
                self.leader_id,
                self.high_watermark,
                error=error,
            )
        )

    # --- the fetch protocol: follower side -----------------------------------------------

    def _send_fetch(self) -> None:
        self.fetch_in_flight = True
        self.request_deadline = self.now_ms + self.config.request_timeout_ms
        if self.snapshot_fetch is not None:
            snapshot_id, position = self.snapshot_fetch
            self._send(
                FetchSnapshotRequest(
                    self.node_id,
                    self.leader_id,
                    self.epoch,
                    snapshot_id,
                    position,
                    self.config.fetch_snapshot_max_bytes,
                )
            )
            return
        self._send(
            FetchRequest(
                self.node_id,
                self.leader_id,
                self.epoch,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_entries,
                self.high_watermark,
            )
        )

    def _find_leader_as_observer(self) -> None:
        """An observer with no leader asks a random voter; the error names the leader."""
        voter = self.rng.choice(sorted(self.voters))
        self._send(
            FetchRequest(
                self.node_id,
                voter,
                self.epoch,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_entries,
                self.high_watermark,
            )
        )
        self.election_deadline = self.now_ms + self.config.request_timeout_ms

    def _handle_fetch_response(self, response: FetchResponse) -> None:
        if response.error != "NONE" or response.epoch < self.epoch:
            if self.role is Role.UNATTACHED and self._names_new_leader(
                response.leader_id, response.epoch
            ):
                self._become(
                    Role.FOLLOWER,
                    self.epoch,
                    "a fetch named the leader",
                    leader_id=response.leader_id,
                )
            return
        if self.role is not Role.FOLLOWER or response.src != self.leader_id:
            if (
                self.role is Role.UNATTACHED
                and response.leader_id == response.src
                and self._names_new_leader(response.src, response.epoch)
            ):
                self._become(
                    Role.FOLLOWER, self.epoch, "fetched from the leader", leader_id=response.src
                )
            return
        if (response.fetch_offset, response.last_fetched_epoch) != (
            self.log.end_offset(),
            self.log.last_epoch(),
        ) or (self.snapshot_fetch, self._storing) != (None, None):
            # The answer to an older request (late or duplicated): ignore it. While a
            # snapshot downloads (or its last chunk is being stored) no Fetch is out, so any
            # answer is a late one; taking its entries would move the log and high watermark
            # past the snapshot being fetched.
            return
        self.fetch_in_flight = False
        self.last_fetch_success_ms = self.now_ms
        self.fetch_deadline = self._fetch_deadline()
        if response.snapshot_id is not None:
            # The leader's log starts after ours ends (or diverges inside its snapshot).
            self.snapshot_fetch = (response.snapshot_id, 0)  # its first chunk begins it
        elif response.diverging is not None:
            _, own_end = self.log.end_offset_for_epoch(response.diverging.epoch)
            self._truncate(min(response.diverging.end_offset, own_end))
        else:
            fresh = [e for e in response.entries if e.offset >= self.log.end_offset()]
            if fresh and fresh[0].offset == self.log.end_offset():
                self._append(fresh)
                self.entries_replicated += len(fresh)
            hw = min(response.high_watermark, self.log.end_offset())
            if hw > self.high_watermark:
                self.high_watermark = hw
        self._send_fetch()

    def _handle_fetch_snapshot_response(self, response: FetchSnapshotResponse) -> None:
        if (
            self.role is not Role.FOLLOWER
            or response.src != self.leader_id
            or response.epoch != self.epoch
            or self.snapshot_fetch is None
        ):
            return
        snapshot_id, position = self.snapshot_fetch
        if (response.snapshot_id, response.position) != (snapshot_id, position):
            return  # the answer to an older request (late or duplicated): ignore it
        if response.error != NONE or (not response.data and position < response.size):
            if response.error in (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE):
                # The leader has moved on to a newer snapshot: ask again from our log.
                self.snapshot_fetch = None
                self._send_fetch()
            return  # NOT_LEADER_OR_FOLLOWER: the fetch timeout decides, as for Fetch
        self.fetch_in_flight = False
        self.last_fetch_success_ms = self.now_ms
        self.fetch_deadline = self._fetch_deadline()
        last = position + len(response.data) >= response.size
        # Written by the driver with the Ready, not here: step() touches no file.
        self._snapshot_chunks.append(SnapshotChunk(snapshot_id, position, response.data, last))
        position += len(response.data)
        if not last:
            self.snapshot_fetch = (snapshot_id, position)
            self._send_fetch()
            return
        # Complete: the driver freezes it and calls snapshot_stored(), which installs it
        # and fetches on.
        self.snapshot_fetch = None
        self._storing = snapshot_id

    def _snapshot_stored(self, snapshot_id: SnapshotId, complete: bool) -> None:
        if self._storing != snapshot_id:
            return
        self._storing = None
        # Not complete: it arrived damaged and was dropped; fetching again starts it afresh.
        if complete and snapshot_id.end_offset >= self.high_watermark:
            self._install_snapshot(snapshot_id)
        if self.role is Role.FOLLOWER and self.snapshot_fetch is None:
            self._send_fetch()

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        """A downloaded snapshot, now durable, replaces the log: the log restarts at its
        end (written with the next Ready), then the state machine loads it
        (Ready.load_snapshot)."""
        if snapshot_id.end_offset < self.high_watermark:
            raise AssertionError(
                f"node {self.node_id} got snapshot {snapshot_id}, below its high watermark "
                f"{self.high_watermark}"
            )
        self.log.reset_to_snapshot(snapshot_id)
        self._unread_past(snapshot_id.end_offset)
        self._installed = snapshot_id  # older snapshots go once the reset is written
        self.flushed_end = snapshot_id.end_offset
        self.high_watermark = snapshot_id.end_offset  # a snapshot holds only committed entries
        self._snapshot_to_load = snapshot_id
        self._log_dirty = True
        self.snapshots_fetched += 1
