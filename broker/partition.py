"""One partition replica on this broker: its log, its idempotent producers, and its role,
leader or follower, as the metadata says (after Kafka's Partition).

As leader it appends producers' batches (stamping its leader epoch), serves followers'
fetches (answering a diverging epoch when a follower's log parted from its own, KIP-320),
tracks the ISR and high watermark through broker.partition_leader, and serves consumers up
to the high watermark. As follower it appends what its fetcher brought, as it is, learns
the high watermark and log start from the leader, and truncates where the leader says its
log diverged: never to the high watermark alone, which could drop acknowledged records.

No event loop, no sockets: callers pass the time in, and `on_change` tells the replica
manager when waiting fetches or produces should look again. Log calls are file I/O on the
page cache (pwrite/pread); fsync happens elsewhere (flush policy, shutdown).

Disk errors: any failed file operation (storage.log) takes the log's directory offline and
reaches callers as KAFKA_STORAGE_ERROR; from then on the partition answers every request so
(Kafka's offline partition) until leadership moves and the broker restarts. A failed
append leaves the producers' state as it was, so no retry is ever answered with another
batch's offsets.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from broker import producer_snapshots
from broker.partition_leader import FollowerState, IsrChange, PartitionLeader
from broker.produce_checks import PreparedBatches, checked_headers, producer_batches
from broker.producer_state import ProducerStateError, ProducerStateManager
from broker.refused_sequences import RefusedSequences
from broker.replica_counts import NOWHERE, ReplicaCounts, Standing
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from metadata.image import PartitionRegistration
from storage.errors import StorageError
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from storage.log import Log
from strom_api.error_codes import ErrorCode
from strom_api.record_batch import LOG_OVERHEAD, BatchHeader, parse_header

NO_LEADER = -1
# A batch refused so may sit behind a batch this leader refused NOT_ENOUGH_REPLICAS.
_GAP_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
REPLAY_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class LeaderAppend:
    base_offset: int
    next_offset: int  # acks=all waits for the high watermark to reach it
    log_append_time_ms: int  # -1 for CreateTime
    leader_epoch: int
    duplicate: bool = False  # a producer's retry of batches already in the log


@dataclass(frozen=True, slots=True)
class FollowerRead:
    """The leader's answer to one partition of a follower's fetch."""

    records: bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging: tuple[int, int] | None = None  # (epoch, end offset)


def storage_error(exc: StorageError) -> ApiError:
    return ApiError(exc.error_name, str(exc))


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _answers_storage_errors(method: _Method) -> _Method:
    """The storage engine's errors (KAFKA_STORAGE_ERROR after a disk error above all) as
    the ApiError a request is answered with; an offline log refuses at once."""

    @functools.wraps(method)
    def wrapper(self: Partition, *args: Any, **kwargs: Any) -> Any:
        if self.log.offline:
            raise self.offline_error()
        try:
            return method(self, *args, **kwargs)
        except StorageError as exc:
            raise storage_error(exc) from None

    return cast(_Method, wrapper)


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: bytes,
        log: Log,
        broker_id: int,
        settings: TopicSettings,
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.settings = settings
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.leader: PartitionLeader | None = None  # set while this broker leads
        self.on_change: Callable[[], None] = lambda: None
        # The broker's aggregate gauges (broker/replica_counts.py), and where this replica
        # stands in them: recounted whenever role, ISR, replicas or min.insync.replicas move.
        self.counts: ReplicaCounts | None = None
        self._standing = NOWHERE
        self._refusals: RefusedSequences | None = None  # made on a first refusal for the ISR
        if log.new_directory:
            # The log was created a moment ago and nothing has written to it: there is no
            # snapshot to list for (two directory listings per new replica were 8-10% of a
            # node's loop while it created 10,000). Only the first Partition may conclude so.
            log.new_directory = False
            self.producers = ProducerStateManager()
        else:
            self.producers = self._load_producers()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def is_leader(self) -> bool:
        return self.leader is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def offline(self) -> bool:
        """The log's directory failed: nothing this replica holds can be served."""
        return self.log.offline

    def offline_error(self) -> ApiError:
        return storage_error(self.log.offline_error())

    def _recount(self) -> None:
        counts = self.counts
        if counts is None:
            return
        standing = Standing.of(
            self.leader is not None,
            len(self.isr),
            len(self.replicas),
            self.settings.min_insync_replicas,
        )
        if standing != self._standing:
            counts.move(self, self._standing, standing)
            self._standing = standing

    def stop_leading(self) -> None:
        """Out of service (deleted, moved away, its log directory failed): it leads nothing
        from now on, and waiting produces fail with NOT_LEADER_OR_FOLLOWER."""
        self.leader = None
        self._recount()

    def update_settings(self, settings: TopicSettings) -> None:
        """The topic's configs changed (min.insync.replicas among them, maybe)."""
        self.settings = settings
        self.log.config = settings.log
        self._recount()

    # --- producer state ----------------------------------------------------------------------

    def _load_producers(self) -> ProducerStateManager:
        """The newest snapshot, then every batch after it, by header only."""
        log = self.log
        # A snapshot past the log end describes batches a crash or truncation took away.
        producer_snapshots.delete_above(log.directory, log.log_end_offset)
        offset, producers = producer_snapshots.load_latest(log.directory, log.log_end_offset)
        producers.replay_all(self._headers_from(max(offset, log.log_start_offset)))
        return producers

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        while offset < self.log.log_end_offset:
            data = self.log.read(offset, REPLAY_CHUNK_BYTES)
            if not data:
                return
            for header in batch_headers(data):
                yield header
                offset = header.next_offset

    def snapshot_producers(self) -> None:
        """Writes the producer state as of the log end (at shutdown; Kafka also does at
        every segment roll). Raises KafkaStorageError (a StorageError) on a disk error."""
        with self.log.io_guard("producer snapshot"):
            producer_snapshots.write(
                self.log.directory, self.log.log_end_offset, self.producers.snapshot()
            )

    # --- role changes from the metadata ----------------------------------------------------------

    def apply_registration(
        self, registration: PartitionRegistration, now_ms: int, settings: TopicSettings
    ) -> bool:
        """Takes the partition's state from the metadata. Returns whether this broker's
        role or the leader it follows changed (the fetchers then re-plan)."""
        self.settings = settings
        old = (self.leader_id, self.leader_epoch)
        try:
            if registration.leader == self.broker_id:
                if self.leader is None or registration.leader_epoch > self.leader_epoch:
                    self._make_leader(registration, now_ms)
                elif registration.partition_epoch > self.partition_epoch:
                    self._update_as_leader(registration, now_ms)
            elif registration.leader_epoch > self.leader_epoch or self.leader is not None:
                self._make_follower(registration)
            else:
                self._take(registration)
        finally:
            self._recount()
        self.on_change()
        return (self.leader_id, self.leader_epoch) != old

    def _take(self, registration: PartitionRegistration) -> None:
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.partition_epoch = registration.partition_epoch
        self.replicas = registration.replicas
        self.isr = registration.isr

    def _make_leader(self, registration: PartitionRegistration, now_ms: int) -> None:
        self._take(registration)
        log = self.log
        # The new epoch starts at the log end: a follower asking where an older epoch ends
        # is answered from here on (Kafka's maybeAssignEpochStartOffset).
        try:
            with log.io_guard("leader epoch checkpoint"):
                log.leader_epochs.assign(registration.leader_epoch, log.log_end_offset)
        except StorageError as exc:
            self.leader = None
            raise storage_error(exc) from None
        self._refusals = None  # the producers' gaps were another leader's making
        self.leader = PartitionLeader.elected(
            self.broker_id,
            registration.replicas,
            registration.isr,
            registration.leader_epoch,
            registration.partition_epoch,
            log.log_end_offset,
            log.high_watermark,
            now_ms,
            min_insync_replicas=self.settings.min_insync_replicas,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
        )
        self._advance_high_watermark()

    def _update_as_leader(self, registration: PartitionRegistration, now_ms: int) -> None:
        """Same leader epoch, newer partition epoch: the ISR or the replica set changed."""
        leader = self.leader
        assert leader is not None
        self._take(registration)
        if registration.replicas != leader.replicas:
            leader.replicas = registration.replicas
            for replica in registration.replicas:
                if replica != self.broker_id and replica not in leader.followers:
                    leader.followers[replica] = FollowerState(
                        last_caught_up_ms=now_ms, leader_end_at_last_fetch=self.log.log_end_offset
                    )
            for replica in list(leader.followers):
                if replica not in registration.replicas:
                    del leader.followers[replica]
        leader.min_insync_replicas = self.settings.min_insync_replicas
        leader.on_isr_committed(registration.isr, registration.partition_epoch)
        self._advance_high_watermark()

    def _make_follower(self, registration: PartitionRegistration) -> None:
        self._take(registration)
        self.leader = None

    def isr_committed(self, isr: Iterable[int], partition_epoch: int) -> None:
        """The controller accepted an ISR change this leader proposed."""
        if self.leader is None or partition_epoch <= self.partition_epoch:
            return
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.leader.on_isr_committed(self.isr, partition_epoch)
        self._recount()
        self._advance_high_watermark()
        self.on_change()

    def isr_refused(self) -> None:
        if self.leader is not None:
            self.leader.on_isr_refused()

    def isr_change_needed(self, now_ms: int, eligible: Callable[[int], bool]) -> IsrChange | None:
        if self.leader is None:
            return None
        return self.leader.isr_change_needed(self.log.log_end_offset, now_ms, eligible)

    # --- checks shared by every request ---------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> PartitionLeader:
        if self.log.offline:
            raise self.offline_error()
        if self.leader is None:
            raise ApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"This broker is not the leader of {self.name}; the leader is broker "
                f"{self.leader_id}.",
            )
        self.check_epoch(current_leader_epoch)
        return self.leader

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise ApiError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"The request's leader epoch {current_leader_epoch} of {self.name} is older "
                f"than the current {self.leader_epoch}.",
            )
        raise ApiError(
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            f"The request's leader epoch {current_leader_epoch} of {self.name} is newer than "
            f"the {self.leader_epoch} this broker knows.",
        )

    # --- leader: producers ---------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes, acks: int, now_ms: int, prepared: PreparedBatches | None = None
    ) -> LeaderAppend:
        """Appends a producer's batches. Raises ApiError (nothing written) on any refusal.
        `prepared`: producer_batches' answer for `records`, when the caller validated them
        already (off the event loop)."""
        leader = self.check_leader()
        if acks == -1 and len(leader.isr) < self.settings.min_insync_replicas:
            return self._below_min_insync(leader, records, now_ms, prepared)
        data, headers = prepared or producer_batches(records, self.settings, now_ms)
        log = self.log
        saved = self.producers.save(h.producer_id for h in headers)
        appended = False
        try:
            duplicate = self._check_producers(headers, log.log_end_offset, now_ms)
            if duplicate is not None:
                return duplicate
            segment = log.active_segment.base_offset
            info = log.append(data, self.leader_epoch, checked=headers)
            appended = True
            self._after_append(segment)
        except StorageError as exc:
            raise storage_error(exc) from None
        finally:
            # Whatever stopped the append (a refusal, a disk error, a bug), the producers'
            # state must not keep batches the log does not hold: the next sequence would
            # be taken past the gap, and the retry answered with another batch's offsets.
            if not appended:
                self.producers.restore(saved)
        if self._refusals is not None:
            self._refusals.appended(headers)
        self._advance_high_watermark()
        self.on_change()
        return LeaderAppend(
            info.first_offset,
            info.last_offset + 1,
            now_ms if self.settings.log_append_time else -1,
            self.leader_epoch,
        )

    def _below_min_insync(
        self,
        leader: PartitionLeader,
        records: bytes,
        now_ms: int,
        prepared: PreparedBatches | None,
    ) -> LeaderAppend:
        """acks=all below min.insync.replicas: raises NOT_ENOUGH_REPLICAS (nothing written),
        except that a retry of batches this log holds is answered as that duplicate, and
        the acks=all wait then says NOT_ENOUGH_REPLICAS_AFTER_APPEND (possibly written).
        Refused NOT_ENOUGH_REPLICAS ("nothing written"), librdkafka took such records for
        unwritten, and when the request after them then failed out of order it bumped its
        epoch and wrote them again: duplicates (a chaos run's seed 2)."""
        try:
            headers = prepared[1] if prepared else checked_headers(records)
        except ApiError:
            headers = []  # refused for the ISR first, as Kafka does
        duplicate = self._retry_of_written(headers, now_ms)
        if duplicate is not None:
            return duplicate
        if self._refusals is None:
            self._refusals = RefusedSequences()
        self._refusals.record(headers, self.producers, now_ms)
        raise ApiError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"The size of the current ISR {list(leader.isr)} of {self.name} is below "
            f"min.insync.replicas={self.settings.min_insync_replicas}.",
        )

    def _retry_of_written(self, headers: list[BatchHeader], now_ms: int) -> LeaderAppend | None:
        """The original append when these batches retry batches already in the log, else
        None; the producers' state is left as it was either way."""
        saved = self.producers.save(h.producer_id for h in headers)
        try:
            return self._check_producers(headers, self.log.log_end_offset, now_ms)
        except ApiError:
            return None
        finally:
            self.producers.restore(saved)

    def _check_producers(
        self, headers: list[BatchHeader], offset: int, now_ms: int
    ) -> LeaderAppend | None:
        """Checks the batches in order, each against the state the ones before it leave
        (several batches of one producer may share a request), recording them at the
        offsets the append will give them; the caller restores the state if the append
        does not happen. Kafka's rule: when any batch is a retry of one already written,
        nothing is appended and the answer is that batch's original offsets."""
        for header in headers:
            try:
                original = self.producers.check(header)
            except ProducerStateError as exc:
                raise self._sequence_error(header, exc, now_ms) from None
            if original is not None:
                return LeaderAppend(
                    original.first_offset,
                    original.last_offset + 1,
                    original.max_timestamp if self.settings.log_append_time else -1,
                    self.leader_epoch,
                    duplicate=True,
                )
            self.producers.replay(header._replace(base_offset=offset))
            offset += header.last_offset_delta + 1
        return None

    def _sequence_error(
        self, header: BatchHeader, exc: ProducerStateError, now_ms: int
    ) -> ApiError:
        """Kafka's answer to a batch the producers' state refuses, except behind a batch this
        leader refused NOT_ENOUGH_REPLICAS: that refusal again (broker/refused_sequences.py)."""
        if self._refusals is not None and exc.error_name in _GAP_ERRORS:
            refusal = self._refusals.explains_gap(header, self.producers, now_ms)
            if refusal is not None:
                return ApiError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"Producer {header.producer_id}'s batch at sequence {header.base_sequence} "
                    f"follows its batch at sequence {refusal.first_seq}, which {self.name} "
                    f"refused NOT_ENOUGH_REPLICAS {now_ms - refusal.at_ms} ms ago (its ISR "
                    "was below min.insync.replicas): retry it after that one.",
                )
        return ApiError(exc.error_name, str(exc))

    def _after_append(self, segment_before: int) -> None:
        """A roll started a new segment: snapshot the producers there, as Kafka does, so a
        restart or a truncation replays at most one segment's batches."""
        if self.log.active_segment.base_offset != segment_before:
            self.snapshot_producers()

    def _advance_high_watermark(self) -> bool:
        leader = self.leader
        if leader is None or not leader.update_high_watermark(self.log.log_end_offset):
            return False
        self.log.update_high_watermark(leader.high_watermark)
        return True

    # --- leader: followers ---------------------------------------------------------------------

    @_answers_storage_errors
    def read_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        max_bytes: int,
        now_ms: int,
        throttled: bool = False,
    ) -> FollowerRead:
        """`throttled`: the leader's replication quota is exceeded (broker/
        replication_quota.py), so no records are read; the follower's position still counts
        (its fetch offset moves the high watermark and the ISR as any other)."""
        leader = self.check_leader(current_leader_epoch)
        if replica_id not in leader.followers:
            raise ApiError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"Broker {replica_id} is not a replica of {self.name} (replicas "
                f"{list(self.replicas)}).",
            )
        log = self.log
        leo = log.log_end_offset
        if last_fetched_epoch >= 0:
            epoch, end = log.leader_epochs.end_offset_for(last_fetched_epoch, leo)
            if epoch < last_fetched_epoch or end < fetch_offset:
                return FollowerRead(
                    b"", log.high_watermark, log.log_start_offset, leo, (epoch, end)
                )
        if not log.log_start_offset <= fetch_offset <= leo:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Fetch offset {fetch_offset} of {self.name} is outside the leader's log "
                f"[{log.log_start_offset}, {leo}].",
            )
        if leader.on_follower_fetch(replica_id, fetch_offset, leo, now_ms):
            log.update_high_watermark(leader.high_watermark)
            self.on_change()
        readable = fetch_offset < leo and not throttled
        records = log.read(fetch_offset, max_bytes) if readable else b""
        return FollowerRead(records, log.high_watermark, log.log_start_offset, leo)

    # --- leader: consumers and admin ---------------------------------------------------------

    @_answers_storage_errors
    def read_for_consumer(
        self, fetch_offset: int, max_bytes: int, current_leader_epoch: int = -1
    ) -> bytes:
        """Whole batches from `fetch_offset`, none at or past the high watermark."""
        self.check_leader(current_leader_epoch)
        log = self.log
        if not log.log_start_offset <= fetch_offset <= log.log_end_offset:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Fetch offset {fetch_offset} is out of range for {self.name}: the log holds "
                f"[{log.log_start_offset}, {log.log_end_offset}).",
            )
        return log.read(fetch_offset, max_bytes, max_offset=log.high_watermark)

    @_answers_storage_errors
    def read_local_replica(self, fetch_offset: int, max_bytes: int) -> bytes:
        """Kafka's debugging consumer (replica id -2): this replica's whole batches from
        `fetch_offset` up to its own high watermark, whether it leads or follows."""
        log = self.log
        if not log.log_start_offset <= fetch_offset <= log.log_end_offset:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Fetch offset {fetch_offset} is out of range for the replica of {self.name} "
                f"on broker {self.broker_id}: it holds [{log.log_start_offset}, "
                f"{log.log_end_offset}).",
            )
        return log.read(fetch_offset, max_bytes, max_offset=log.high_watermark)

    def end_offset_for_epoch(self, epoch: int, current_leader_epoch: int) -> tuple[int, int]:
        self.check_leader(current_leader_epoch)
        answer = self.log.leader_epochs.end_offset_for(epoch, self.log.log_end_offset)
        if answer == (UNDEFINED_EPOCH, UNDEFINED_OFFSET):
            return answer
        return answer[0], min(answer[1], self.log.log_end_offset)

    @_answers_storage_errors
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader; -1 means up to the high watermark. Followers move
        their log start when the next fetch answer carries the new one."""
        self.check_leader()
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0 or target > self.log.high_watermark:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot delete records of {self.name} before offset {offset}: it is past the "
                f"high watermark {self.log.high_watermark}.",
            )
        start = self.log.delete_records_before(target)
        self.on_change()
        return start

    # --- follower ----------------------------------------------------------------------------

    @_answers_storage_errors
    def append_as_follower(
        self, records: bytes, leader_high_watermark: int, leader_log_start: int
    ) -> None:
        log = self.log
        if records:
            first = parse_header(records)
            if first.base_offset < log.log_end_offset < first.next_offset:
                self._restart_inside_batch(first.base_offset)
            segment = log.active_segment.base_offset
            log.append_as_follower(records)
            self.producers.replay_all(batch_headers(records))
            self._after_append(segment)
        log.update_high_watermark(min(leader_high_watermark, log.log_end_offset))
        start = min(leader_log_start, log.high_watermark)
        if start > log.log_start_offset:
            log.delete_records_before(start)
        self.on_change()

    def _restart_inside_batch(self, batch_base: int) -> None:
        """The leader sent the batch holding our log end, and it starts below it. Replicas copy
        batches whole, so records of ours inside that batch's range are not the leader's: they
        were never committed. Two ways to get here, both because DeleteRecords may cut
        mid-batch: an empty log restarted at the leader's log start inside this batch, or a
        log ending at that log start with an older leader's uncommitted records, which the
        epoch check cannot see (the leader's epoch entry now starts at its log start). Kafka's
        follower handles only the first (an empty log starts at the batch); handling both here
        keeps the second from being refused on every fetch and never rejoining the ISR."""
        if batch_base >= self.log.log_start_offset:
            self.truncate_to(batch_base)
        else:
            # Below our log start: start at the batch instead; the log start moves up again
            # once the batch is appended (append_as_follower).
            self.restart_at(batch_base)

    @_answers_storage_errors
    def truncate_on_divergence(self, leader_epoch: int, leader_end_offset: int) -> int:
        """The leader says our log parted from its own after epoch `leader_epoch`, which on
        the leader ends at `leader_end_offset`. Truncates where Kafka's follower does
        (AbstractFetcherThread.getOffsetTruncationState) and returns the new log end; when
        we have no entry for that epoch the next fetch carries our previous epoch and the
        leader answers again, so truncation converges in rounds."""
        log = self.log
        leo = log.log_end_offset
        if leader_end_offset == UNDEFINED_OFFSET:
            target = min(log.high_watermark, leo)
        else:
            epoch, end = log.leader_epochs.end_offset_for(leader_epoch, leo)
            if epoch == UNDEFINED_EPOCH:
                target = min(leader_end_offset, leo)
            elif epoch != leader_epoch:
                target = min(end, leo)
            else:
                target = min(leader_end_offset, end, leo)
        self.truncate_to(target)
        return log.log_end_offset

    @_answers_storage_errors
    def truncate_to(self, offset: int) -> None:
        log = self.log
        if offset >= log.log_end_offset:
            log.truncate_to(offset)  # still drops an epoch that starts at the log end
            return
        log.truncate_to(offset)
        # Rebuilt from the newest snapshot at or below the new end plus the log after it
        # (Kafka's truncateAndReload): dropping only the cut batches would forget a
        # producer whose remembered batches were all cut though older ones remain.
        self.producers = self._load_producers()
        self.on_change()

    @_answers_storage_errors
    def restart_at(self, offset: int) -> None:
        """The leader's log starts past our end: start empty at its log start."""
        self.log.truncate_fully_and_start_at(offset)
        self.producers = ProducerStateManager()
        producer_snapshots.delete_above(self.log.directory, -1)
        self.on_change()


def batch_headers(data: bytes | memoryview) -> Iterator[BatchHeader]:
    pos = 0
    while pos < len(data):
        header = parse_header(data, pos)
        yield header
        pos += header.batch_length + LOG_OVERHEAD
