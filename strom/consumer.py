"""The consumer: kafka-python's KafkaConsumer shape with Kafka's config names in snake_case.

    consumer = Consumer("events", bootstrap_servers="127.0.0.1:9092",
                        auto_offset_reset="earliest")
    for record in consumer:            # ConsumerRecord(topic, partition, offset, ...)
        ...
    batches = consumer.poll(timeout_ms=1000, max_records=100)   # {TopicPartition: [...]}

With `group_id`, subscribed consumers share the topics' partitions through the group
coordinator (strom.membership): poll() joins and rejoins the group as needed, calls the
rebalance listener in the caller's thread, starts each newly assigned partition at the
group's committed offset (else per `auto_offset_reset`), and commits the positions every
`auto_commit_interval_ms` when `enable_auto_commit`. Without a group a subscription takes
every partition of its topics, as kafka-python does; `assign` takes chosen partitions.
`subscribe(pattern=...)` follows every topic whose whole name matches the regular expression
(Java's Pattern.matches).

A subscription follows the cluster as Kafka's consumers do: metadata is asked for again at
least every `metadata_max_age_ms`, in the background, and the next poll acts on the answer.
A new matching topic joins a pattern subscription; partitions added to a subscribed topic
are consumed, without a group at once, with one through a rebalance that the group's leader
starts when the partition counts it assigned from have changed. A new partition starts at
the group's committed offset, else per `auto_offset_reset`; its starting offset is known
before poll() returns with it assigned, so with "latest" every record written after that
is read (records written before, while the consumer had not yet noticed the partition or
was rebalancing, are skipped, as in Kafka: "earliest" reads them). `assign` takes exactly
the partitions named, now and later.
Records are prefetched by the process's I/O thread (strom.fetcher) so poll() rarely waits
on the network.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from strom._loop_thread import shared_loop
from strom.assignors import COOPERATIVE, by_name
from strom.cluster import Cluster, parse_bootstrap
from strom.errors import ClientErrorName, ClosedError, StromError
from strom.fetcher import EARLIEST, LATEST, ConsumerRecord, FetchConfig, Fetcher, TopicPartition
from strom.membership import CommitFailedError, GroupMembership, GroupSettings
from strom.security import client_security
from strom_api.error_codes import ErrorCode

__all__ = ["CommitFailedError", "Consumer", "ConsumerRecord", "TopicPartition"]

log = logging.getLogger("strom.consumer")

# What the background metadata look-up answers: the subscription's topics (a pattern's
# matching topics now) and the partition counts of those and of the group's topics.
_Look = tuple[list[str], dict[str, int]]


class Consumer:
    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        client_id: str = "strom-consumer",
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Sequence[str] = ("range", "cooperative-sticky"),
        auto_offset_reset: str = "latest",
        max_poll_records: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        max_partition_fetch_bytes: int = 1024 * 1024,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
        isolation_level: str = "read_uncommitted",
        exclude_internal_topics: bool = True,
        consumer_timeout_ms: float = float("inf"),
        key_deserializer: Callable[[bytes], Any] | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
    ) -> None:
        if group_id is not None and not group_id:
            raise StromError(
                ErrorCode.INVALID_GROUP_ID, "group_id must not be empty (or None: no group)"
            )
        if heartbeat_interval_ms >= session_timeout_ms:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "heartbeat_interval_ms must be lower than session_timeout_ms",
            )
        try:
            assignors = tuple(by_name(name) for name in partition_assignment_strategy)
        except ValueError as exc:
            raise StromError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if not assignors:
            raise StromError(ErrorCode.INVALID_CONFIG, "partition_assignment_strategy is empty")
        if len({a.protocol for a in assignors}) > 1 and assignors[0].protocol == COOPERATIVE:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "cooperative-sticky can be combined with eager assignors only after them "
                "(Kafka's upgrade order)",
            )
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}",
            )
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"isolation_level must be read_uncommitted or read_committed, not "
                f"{isolation_level!r}",
            )
        if max_poll_records < 1:
            raise StromError(ErrorCode.INVALID_CONFIG, "max_poll_records must be >= 1")
        if metadata_max_age_ms < 0:
            raise StromError(ErrorCode.INVALID_CONFIG, "metadata_max_age_ms must be >= 0")
        if reconnect_backoff_ms < 0 or reconnect_backoff_max_ms < 0:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "reconnect_backoff_ms and reconnect_backoff_max_ms must be >= 0",
            )
        self.client_id = client_id
        self.max_poll_records = max_poll_records
        self.consumer_timeout_s = consumer_timeout_ms / 1000
        self.request_timeout_s = request_timeout_ms / 1000
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self._subscription: list[str] = []
        self._pattern: re.Pattern[str] | None = None
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.auto_offset_reset = auto_offset_reset
        # The metadata look-up in flight, tagged with the subscription it was made for.
        self._look: tuple[int, concurrent.futures.Future[_Look]] | None = None
        self._next_look = 0.0
        self._subscription_version = 0
        self.exclude_internal_topics = exclude_internal_topics
        self._listener: Any = None
        self._closed = False
        self.group_id = group_id
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self._io = shared_loop()
        # A rebalance (JoinGroup + SyncGroup) still going on when a poll's time ran out: it
        # goes on in the I/O thread, and a later poll takes its outcome.
        self._joining: concurrent.futures.Future[Any] | None = None
        config = FetchConfig(
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            auto_offset_reset=auto_offset_reset,
            isolation_level=1 if isolation_level == "read_committed" else 0,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        bootstrap = parse_bootstrap(
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )
        tls = client_security(
            security_protocol,
            ssl_cafile,
            ssl_certfile,
            ssl_keyfile,
            ssl_password,
            ssl_check_hostname,
            sasl_mechanism,
            sasl_plain_username,
            sasl_plain_password,
            sasl_oauth_token_provider,
        )

        async def build() -> tuple[Cluster, Fetcher]:
            cluster = Cluster(
                bootstrap,
                request_timeout_ms,
                retry_backoff_ms,
                metadata_max_age_ms,
                reconnect_backoff_ms,
                reconnect_backoff_max_ms,
                tls,
            )
            return cluster, Fetcher(cluster, config)

        self._cluster, self._fetcher = self._io.run(build())
        self._group: GroupMembership | None = None
        if group_id is not None:
            settings = GroupSettings(
                group_id,
                group_instance_id,
                client_id,
                session_timeout_ms,
                max_poll_interval_ms,
                heartbeat_interval_ms,
                assignors,
                request_timeout_ms,
                retry_backoff_ms,
            )
            self._group = GroupMembership(self._cluster, settings, lambda: self._subscription)
        if topics:
            self.subscribe(topics)

    def _run(self, coroutine: Any, timeout: float | None = None) -> Any:
        if self._closed:
            coroutine.close()
            raise ClosedError("the consumer")
        try:
            return self._io.run(coroutine, timeout)
        except concurrent.futures.TimeoutError:
            raise StromError(
                ErrorCode.REQUEST_TIMED_OUT, f"no answer within {timeout} s", True
            ) from None

    # --- what to consume -------------------------------------------------------------

    def subscribe(
        self, topics: Iterable[str] = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        """With a group: the group shares the topics' partitions (the next poll joins);
        `listener` has on_partitions_revoked(partitions) and on_partitions_assigned(
        partitions) (and optionally on_partitions_lost), called in poll()'s thread.
        `pattern` instead of topics: every topic whose name matches it, now and later."""
        names = [topics] if isinstance(topics, str) else list(topics)
        if bool(names) == (pattern is not None):
            raise StromError(
                ErrorCode.INVALID_CONFIG, "subscribe needs either topics or a pattern (not both)"
            )
        self._listener = listener
        self._pattern = None
        if pattern is not None:
            try:
                self._pattern = re.compile(pattern)
            except re.error as exc:
                raise StromError(
                    ErrorCode.INVALID_CONFIG,
                    f"pattern {pattern!r} is not a regular expression: {exc}",
                ) from None
            names = self._matching(
                self._run(self._cluster.topic_names(self.exclude_internal_topics))
            )
        self._follow(names)

    def _matching(self, names: Iterable[str]) -> list[str]:
        pattern = self._pattern
        assert pattern is not None
        return sorted(name for name in names if pattern.fullmatch(name))

    def _follow(self, names: list[str]) -> None:
        self._subscription = names
        self._subscription_changed()
        if self._group is not None:
            self._group.rejoin = True
            return

        async def take_all() -> None:
            partitions = []
            for name in names:
                info = await self._cluster.topic(name, self.request_timeout_s)
                partitions += [TopicPartition(name, p) for p in sorted(info.partitions)]
            self._fetcher.assign(partitions)

        self._run(take_all())

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def unsubscribe(self) -> None:
        self._subscription = []
        self._pattern = None
        self._subscription_changed()
        self._run(_call(lambda: self._fetcher.assign([])))

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        tps = [TopicPartition(*tp) for tp in partitions]
        self._subscription = []
        self._pattern = None
        self._subscription_changed()
        self._run(_call(lambda: self._fetcher.assign(tps)))

    def _subscription_changed(self) -> None:
        """A look-up in flight answers for the old subscription: its answer is dropped."""
        self._subscription_version += 1
        self._look = None
        self._next_look = time.monotonic() + self.metadata_max_age_s

    # --- following the cluster's metadata ---------------------------------------------

    def _watch_metadata(self) -> None:
        """Starts a metadata look-up every metadata.max.age.ms and, at the poll after its
        answer, acts on it. Runs in poll()'s thread, never waiting on the network."""
        if self._pattern is None and not self._subscription:
            return
        if self._look is None:
            if time.monotonic() >= self._next_look:
                self._next_look = time.monotonic() + self.metadata_max_age_s
                future = self._io.submit(self._look_up())
                self._look = (self._subscription_version, future)
            return
        version, future = self._look
        if not future.done():
            return
        self._look = None
        try:
            topics, counts = future.result()
        except (StromError, concurrent.futures.CancelledError) as exc:
            # As Kafka's client Metadata: a failed update is retried after retry.backoff.ms.
            log.debug("metadata look-up failed: %s", exc)
            self._next_look = time.monotonic() + self.retry_backoff_s
            return
        if version == self._subscription_version:
            self._notice(topics, counts)

    async def _look_up(self) -> _Look:
        """On the I/O loop: fresh metadata of the subscription's topics (for a pattern, of
        every topic) and of the topics the group leader assigns."""
        group_topics = self._group.group_topics() if self._group is not None else frozenset()
        if self._pattern is not None:
            topics = self._matching(await self._cluster.topic_names(self.exclude_internal_topics))
        else:
            topics = list(self._subscription)
            await self._cluster.refresh([*topics, *group_topics])
        return topics, self._cluster.partition_counts({*topics, *group_topics})

    def _notice(self, topics: list[str], counts: dict[str, int]) -> None:
        if topics != self._subscription:
            log.info("subscription: now the topics %s (were %s)", topics, self._subscription)
            self._subscription = topics
            if self._group is not None:
                self._group.rejoin = True
        if self._group is not None:
            self._group.metadata_changed(counts)
        else:
            self._take_partitions(counts)

    def _take_partitions(self, counts: dict[str, int]) -> None:
        """Without a group: every partition of the subscribed topics, new ones included (a
        topic whose metadata is missing now keeps the partitions it had)."""
        current = set(self._fetcher.assignment)
        wanted = {tp for tp in current if tp.topic in self._subscription and tp.topic not in counts}
        wanted |= {
            TopicPartition(topic, p)
            for topic in self._subscription
            if topic in counts
            for p in range(counts[topic])
        }
        if wanted == current:
            return
        added = wanted - current
        if added:
            log.info(
                "consuming new partitions %s (from auto_offset_reset=%s)",
                sorted(added),
                self.auto_offset_reset,
            )
        self._run(self._reassign(sorted(wanted), added))

    async def _reassign(self, partitions: list[TopicPartition], added: set[TopicPartition]) -> None:
        self._fetcher.assign(partitions)
        await self._fetcher.wait_for_positions(added, self.request_timeout_s)

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.assignment)

    def partitions_for_topic(self, topic: str) -> set[int]:
        info = self._run(self._cluster.topic(topic, self.request_timeout_s))
        return set(info.partitions)

    def topics(self) -> set[str]:
        self._run(self._cluster.refresh())
        return {t for t, i in self._cluster.topics.items() if i.error == ErrorCode.NONE}

    # --- positions -------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise StromError(ErrorCode.INVALID_CONFIG, f"seek offset must be >= 0, not {offset}")
        tp = TopicPartition(*partition)
        self._run(_call(lambda: self._fetcher.seek(tp, offset)))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._reset(partitions, LATEST)

    def _reset(self, partitions: tuple[TopicPartition, ...], timestamp: int) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or list(self._fetcher.assignment)
        self._run(self._fetcher.reset_offsets(tps, timestamp), self.request_timeout_s + 5)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record poll() returns (resolving it first if needed)."""
        tp = TopicPartition(*partition)
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            found = self._fetcher.positions.get(tp)
            if found is not None:
                return found
            if tp not in self._fetcher.assignment:
                raise StromError(
                    ClientErrorName.ILLEGAL_STATE, f"{tp.topic}-{tp.partition} is not assigned"
                )
            if time.monotonic() > deadline:
                raise StromError(ErrorCode.REQUEST_TIMED_OUT, f"no position for {tp} yet", True)
            time.sleep(0.01)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._fetcher.high_watermarks.get(TopicPartition(*partition))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets(partitions, EARLIEST)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._offsets(partitions, LATEST)

    def _offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        wanted = {TopicPartition(*tp): timestamp for tp in partitions}
        found = self._run(self._fetcher.list_offsets(wanted), self.request_timeout_s + 5)
        return {tp: offset for tp, (offset, _) in found.items()}

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each time; None if none."""
        wanted = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        found = self._run(self._fetcher.list_offsets(wanted), self.request_timeout_s + 5)
        return {tp: (found[tp] if found[tp][0] >= 0 else None) for tp in wanted}

    def pause(self, *partitions: TopicPartition) -> None:
        tps = {TopicPartition(*tp) for tp in partitions}
        self._run(_call(lambda: self._fetcher.paused.update(tps)))

    def resume(self, *partitions: TopicPartition) -> None:
        tps = {TopicPartition(*tp) for tp in partitions}

        def resume() -> None:
            self._fetcher.paused.difference_update(tps)
            self._fetcher._kick()

        self._run(_call(resume))

    def paused(self) -> set[TopicPartition]:
        return set(self._fetcher.paused)

    # --- reading ---------------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, up to max_records (max_poll_records),
        waiting at most timeout_ms for some to arrive. As Kafka's poll, a rebalance counts
        against the timeout: one that needs longer (a member that is slow to rejoin) goes on
        in the background, this poll returns nothing, and a later one completes it."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        limit = max_records or self.max_poll_records
        self._watch_metadata()
        if self._group is not None and self._subscription:
            self._group.last_poll = time.monotonic()
            if not self._ensure_membership(deadline):
                return {}
            self._maybe_auto_commit()
        remaining = max(deadline - time.monotonic(), 0.0)
        batches = self._run(self._fetcher.poll(limit, remaining))
        if self.key_deserializer or self.value_deserializer:
            batches = {tp: [self._deserialize(r) for r in rs] for tp, rs in batches.items()}
        return batches  # type: ignore[no-any-return]

    # --- the group ---------------------------------------------------------------------

    def _ensure_membership(self, deadline: float) -> bool:
        """Rebalances while the group asks for it; False when `deadline` came first (the
        rebalance under way is kept in self._joining for the next poll)."""
        group = self._group
        assert group is not None
        while not self._closed:
            if self._joining is None:
                if not group.rejoin:
                    return True
                revoke = group.to_revoke_before_join()
                if revoke:
                    if self.enable_auto_commit:
                        self._commit_quietly()
                    self._call_listener("on_partitions_revoked", revoke)
                    self._run(_call(lambda: self._fetcher.assign([])))
                for topic in self._subscription:  # wait for the subscribed topics to exist
                    self._run(self._cluster.topic(topic, self.request_timeout_s))
                self._joining = self._io.submit(group.join())
            try:
                assigned, revoked = self._joining.result(max(deadline - time.monotonic(), 0))
            except concurrent.futures.TimeoutError:
                return False
            except StromError as exc:
                self._joining = None
                if exc.retriable or exc.name in (
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    ErrorCode.UNKNOWN_MEMBER_ID,
                ):
                    time.sleep(0.1)
                    continue
                raise
            self._joining = None
            if revoked:
                if self.enable_auto_commit:
                    self._commit_quietly(revoked)
                self._call_listener("on_partitions_revoked", revoked)
            kept = set(self._fetcher.assignment) & assigned
            added = assigned - kept
            committed = self._run(group.committed(sorted(added))) if added else {}

            self._run(self._apply_assignment(assigned, committed))
            self._call_listener("on_partitions_assigned", added)
        return False

    async def _apply_assignment(
        self, assigned: set[TopicPartition], committed: dict[TopicPartition, int | None]
    ) -> None:
        """On the I/O loop: the new assignment, newly assigned partitions starting at the
        group's committed offsets (the others keep their positions), else per
        auto_offset_reset, worked out before the rebalance counts as done."""
        self._fetcher.assign(sorted(assigned))
        for tp, offset in committed.items():
            if offset is not None:
                self._fetcher.seek(tp, offset)
        await self._fetcher.wait_for_positions(committed, self.request_timeout_s)

    def _call_listener(self, method: str, partitions: set[TopicPartition]) -> None:
        callback = getattr(self._listener, method, None)
        if callback is not None and (partitions or method == "on_partitions_assigned"):
            callback(sorted(partitions))

    def _consumed(
        self, only: set[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, str]]:
        positions = dict(self._fetcher.positions)
        return {tp: (offset, "") for tp, offset in positions.items() if only is None or tp in only}

    def _commit_quietly(self, only: set[TopicPartition] | None = None) -> None:
        try:
            self.commit(only=only)
        except StromError:
            pass  # a rebalance moved them: the next owner starts from the last commit

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
            self.commit_async()

    def commit(
        self,
        offsets: dict[TopicPartition, Any] | None = None,
        *,
        only: set[TopicPartition] | None = None,
    ) -> None:
        """Commits `offsets` ({TopicPartition: offset or OffsetAndMetadata}) or else the
        positions of every assigned partition (the next records to read), and waits for
        the coordinator's answer. CommitFailedError when the group rebalanced meanwhile."""
        group = self._require_group()
        values = _offset_values(offsets) if offsets is not None else self._consumed(only)
        if values:
            self._run(group.commit(values), self.request_timeout_s + 5)

    def commit_async(
        self,
        offsets: dict[TopicPartition, Any] | None = None,
        callback: Callable[[dict[TopicPartition, Any], Exception | None], Any] | None = None,
    ) -> concurrent.futures.Future[None]:
        group = self._require_group()
        values = _offset_values(offsets) if offsets is not None else self._consumed()
        future = self._io.submit(group.commit(values))
        if callback is not None:
            future.add_done_callback(lambda f: callback(values, _exception(f)))
        return future

    def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset for the partition (None: none yet)."""
        group = self._require_group()
        tp = TopicPartition(*partition)
        found: dict[TopicPartition, int | None] = self._run(group.committed([tp]))
        return found.get(tp)

    def _require_group(self) -> GroupMembership:
        if self._group is None:
            raise StromError(
                ErrorCode.INVALID_GROUP_ID, "committing offsets needs a consumer with a group_id"
            )
        return self._group

    def _deserialize(self, record: ConsumerRecord) -> ConsumerRecord:
        key = record.key
        value = record.value
        if self.key_deserializer is not None and key is not None:
            key = self.key_deserializer(key)
        if self.value_deserializer is not None and value is not None:
            value = self.value_deserializer(value)
        return record._replace(key=key, value=value)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one by one; stops after consumer_timeout_ms without any."""
        idle_since = time.monotonic()
        while not self._closed:
            batches = self.poll(timeout_ms=min(self.consumer_timeout_s, 1.0) * 1000)
            if not batches:
                if time.monotonic() - idle_since >= self.consumer_timeout_s:
                    return
                continue
            for records in batches.values():
                yield from records
            idle_since = time.monotonic()

    def close(self, autocommit: bool = True) -> None:
        """Commits the positions (enable_auto_commit), leaves the group, releases channels."""
        if self._closed:
            return
        if (
            self._group is not None
            and autocommit
            and self.enable_auto_commit
            and self._group.member_id
        ):
            self._commit_quietly()
        group = self._group
        if self._joining is not None:  # a rebalance left unfinished: the member leaves instead
            self._joining.cancel()
            self._joining = None

        async def shut() -> None:
            if group is not None:
                await group.leave()
            await self._fetcher.close()
            await self._cluster.close()

        self._io.run(shut())
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _exception(future: concurrent.futures.Future[None]) -> Exception | None:
    error = future.exception()
    return error if isinstance(error, Exception) or error is None else Exception(str(error))


def _offset_values(offsets: dict[TopicPartition, Any]) -> dict[TopicPartition, tuple[int, str]]:
    out = {}
    for tp, value in offsets.items():
        if isinstance(value, int):
            out[TopicPartition(*tp)] = (value, "")
        else:  # OffsetAndMetadata(offset, metadata) as kafka-python has it
            out[TopicPartition(*tp)] = (int(value[0]), str(value[1] or ""))
    return out


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Runs `fn` on the I/O loop (where the fetcher's state lives)."""
    return fn(*args)
