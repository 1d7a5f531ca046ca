"""The pull-based fetch protocol of KIP-595, both sides.

Followers and observers send Fetch with their log end offset and the epoch of their last
entry; the leader answers with entries and its high watermark, or with the point where the
follower's log diverges from its own (DivergingEpoch: the follower truncates there and
fetches again), or holds the fetch (long poll) until there is something new.
"""

from __future__ import annotations

from raft.messages import (
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    DivergingEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
)
from raft.node_state import NodeState
from raft.roles import Role


class FetchProtocol(NodeState):
    # --- the fetch protocol: leader side -------------------------------------------------

    def _handle_fetch_request(self, request: FetchRequest) -> None:
        if request.epoch < self.epoch:
            self._reply_fetch_error(request, FENCED_LEADER_EPOCH)
            return
        if self.role is not Role.LEADER or self.leader is None:
            self._reply_fetch_error(request, NOT_LEADER_OR_FOLLOWER)
            return
        diverging = self._diverging(request)
        if diverging is not None:
            self._send(self._fetch_response(request, (), diverging))
            return
        self.parked.pop(request.src, None)
        self.leader.record_fetch(request.src, request.fetch_offset, self.now_ms)
        moved = self._update_leader_high_watermark()  # answers the parked fetches if it moved
        if not moved and request.fetch_offset >= self.log.end_offset():
            # Long poll: nothing new for it; hold the fetch until there is data or a new high
            # watermark, or the wait runs out.
            self.parked[request.src] = (request, self.now_ms + self.config.long_poll_ms)
            return
        self._answer_fetch(request)

    def _expire_parked_fetches(self, now: int) -> None:
        """Answers the long-polled fetches whose wait ran out (empty, with the high mark)."""
        for replica, (request, deadline) in list(self.parked.items()):
            if now >= deadline:
                del self.parked[replica]
                self._answer_fetch(request)

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
        self._send(self._fetch_response(request, tuple(self.log.read(request.fetch_offset, count))))

    def _fetch_response(
        self,
        request: FetchRequest,
        entries: tuple[Entry, ...],
        diverging: DivergingEpoch | None = None,
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
        self._send(
            FetchRequest(
                self.node_id,
                self.leader_id,
                self.epoch,
                self.log.end_offset(),
                self.log.last_epoch(),
                self.config.fetch_max_entries,
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
        ):
            return  # the answer to an older request (late or duplicated): ignore it
        self.fetch_in_flight = False
        self.last_fetch_success_ms = self.now_ms
        self.fetch_deadline = self._fetch_deadline()
        if response.diverging is not None:
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
