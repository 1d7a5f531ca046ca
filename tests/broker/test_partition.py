"""One partition replica, leader or follower, over real logs in tmp_path: the leader's produce
path (offsets, epoch stamping, produce checks, idempotent producers), the high watermark
over the ISR, consumers held below it, followers copying the leader's bytes verbatim, and
the fetch / diverging-epoch / truncate loop (KIP-101, KIP-279, KIP-320) that makes every
replica's log converge on the leader's without losing a record below a high watermark."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Iterable

import pytest
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from broker import producer_snapshots
from broker.partition import FollowerRead, Partition
from broker.refused_sequences import REFUSAL_MEMORY_MS
from broker.topic_settings import TopicSettings
from metadata.errors import ApiError
from metadata.image import PartitionRegistration
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from storage.log import Log
from strom_api import compression
from strom_api.record_batch import (
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    iter_batches,
    parse_header,
    validate_batch,
)
from strom_api.records import Record, decode_batches, encode_batch

NOW = 1_700_000_000_000
TOPIC_ID = bytes(range(16))
ALL = (1, 2, 3)
BIG = 1 << 30

# --- helpers ---------------------------------------------------------------------------------

_serial = itertools.count()


def log_config(**overrides: int) -> LogConfig:
    # retention.ms=-1: batch timestamps may be anything without retention deleting segments.
    return LogConfig(**{"retention_ms": -1, **overrides})


def topic_settings(min_isr: int = 1, log: LogConfig | None = None, **kw: object) -> TopicSettings:
    return TopicSettings(log=log or log_config(), min_insync_replicas=min_isr, **kw)  # type: ignore[arg-type]


def batch(
    n: int = 1,
    *,
    ts: int = NOW,
    max_ts: int | None = None,
    pid: int = -1,
    pepoch: int = -1,
    seq: int = -1,
    size: int = 8,
    **kw: bool | int,
) -> bytes:
    """A producer's batch of `n` records (offsets 0..n-1), every call with distinct values;
    the last record has timestamp `max_ts` when given, the others `ts`."""
    tag = next(_serial)
    records = [
        Record(
            i,
            max_ts if max_ts is not None and i == n - 1 else ts,
            None,
            f"{tag}:{i}:".encode().ljust(size, b"."),
        )
        for i in range(n)
    ]
    return encode_batch(
        records,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
        **kw,  # type: ignore[arg-type]
    )


def open_partition(
    directory: str | os.PathLike[str], broker_id: int = 1, settings: TopicSettings | None = None
) -> Partition:
    settings = settings or topic_settings()
    log = Log.open(str(directory), settings.log, clock=ManualClock(NOW))
    return Partition("orders", 0, TOPIC_ID, log, broker_id, settings)


def reopen(p: Partition) -> Partition:
    """The broker restarts: the log is closed and opened again, the partition rebuilt."""
    p.log.close()
    return open_partition(p.log.directory, p.broker_id, p.settings)


def registration(
    leader: int,
    epoch: int,
    isr: Iterable[int] = ALL,
    replicas: Iterable[int] = ALL,
    partition_epoch: int | None = None,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(replicas),
        isr=tuple(isr),
        leader=leader,
        leader_epoch=epoch,
        partition_epoch=epoch if partition_epoch is None else partition_epoch,
    )


def elect(
    partitions: Iterable[Partition],
    leader: int,
    epoch: int,
    isr: Iterable[int] | None = None,
    replicas: Iterable[int] | None = None,
    partition_epoch: int | None = None,
    now: int = NOW,
) -> None:
    """The metadata names `leader` for `epoch`; every replica in `partitions` hears it."""
    partitions = list(partitions)
    replicas = tuple(replicas) if replicas is not None else tuple(p.broker_id for p in partitions)
    isr = tuple(isr) if isr is not None else replicas
    for p in partitions:
        p.apply_registration(
            registration(leader, epoch, isr, replicas, partition_epoch), now, p.settings
        )


def replicas(
    tmp_path: os.PathLike[str], ids: Iterable[int] = ALL, settings: TopicSettings | None = None
) -> dict[int, Partition]:
    return {i: open_partition(os.path.join(tmp_path, f"broker-{i}"), i, settings) for i in ids}


def refused(error_name: str, fn: Callable[..., object], *args: object, **kw: object) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kw)
    assert info.value.error_name == error_name, str(info.value)
    return info.value


def fetch_once(
    follower: Partition, leader: Partition, max_bytes: int = BIG, now: int = NOW
) -> FollowerRead:
    """One round of the replica fetcher: fetch from the log end with the latest epoch, then
    truncate on a diverging answer or append what came (and learn the HW, log start)."""
    answer = leader.read_for_follower(
        follower.broker_id,
        follower.log.log_end_offset,
        follower.log.leader_epochs.latest_epoch(),
        follower.leader_epoch,
        max_bytes,
        now,
    )
    if answer.diverging is not None:
        follower.truncate_on_divergence(*answer.diverging)
    else:
        follower.append_as_follower(answer.records, answer.high_watermark, answer.log_start_offset)
    return answer


def catch_up(
    follower: Partition, leader: Partition, max_bytes: int = BIG, rounds: int = 50
) -> list[tuple[tuple[int, int], int]]:
    """Fetches until an answer brings nothing; returns each divergence answered as
    ((epoch, end offset), the follower's log end after truncating)."""
    truncations = []
    for _ in range(rounds):
        hw_before = follower.log.high_watermark
        answer = fetch_once(follower, leader, max_bytes)
        if answer.diverging is not None:
            truncations.append((answer.diverging, follower.log.log_end_offset))
            # Whatever the follower learnt was below a high watermark is on the leader:
            # truncating below it would drop acknowledged records.
            assert follower.log.log_end_offset >= hw_before
            continue
        if not answer.records:
            return truncations
    raise AssertionError(
        f"broker {follower.broker_id} did not converge on leader {leader.broker_id} in "
        f"{rounds} fetches: {truncations[-5:]}"
    )


def sync_all(leader: Partition, followers: Iterable[Partition]) -> None:
    """Every follower catches up, then fetches once more so the HW reaches everyone."""
    followers = list(followers)
    for f in followers:
        catch_up(f, leader)
    for f in followers:
        fetch_once(f, leader)


def log_bytes(log: Log, upto: int | None = None) -> bytes:
    """The stored batches from the log start up to `upto` (default: the log end)."""
    out = bytearray()
    offset = log.log_start_offset
    limit = log.log_end_offset if upto is None else upto
    while offset < limit:
        data = log.read(offset, BIG, max_offset=limit)
        if not data:
            break
        out += data
        for _, header in iter_batches(data):
            offset = header.next_offset
    return bytes(out)


def headers_of(log: Log) -> list[BatchHeader]:
    return [h for _, h in iter_batches(log_bytes(log))]


def values_of(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for _, records in decode_batches(data) for r in records]


def single_leader(tmp_path: os.PathLike[str], settings: TopicSettings | None = None) -> Partition:
    """A one-replica partition led by broker 1 at epoch 1 (the HW follows the log end)."""
    p = open_partition(os.path.join(tmp_path, "broker-1"), 1, settings)
    elect([p], 1, 1)
    return p


# --- leader: appends -------------------------------------------------------------------------


def test_leader_append_assigns_offsets_from_the_log_end_and_stamps_its_epoch(tmp_path):
    p = single_leader(tmp_path)
    elect([p], 1, 3)
    changes = []
    p.on_change = lambda: changes.append(p.log.log_end_offset)

    first = p.append_as_leader(batch(3), acks=1, now_ms=NOW)
    second = p.append_as_leader(batch(2), acks=1, now_ms=NOW)

    assert (first.base_offset, first.next_offset, first.leader_epoch) == (0, 3, 3)
    assert (second.base_offset, second.next_offset) == (3, 5)
    assert first.log_append_time_ms == -1 and not first.duplicate
    assert changes == [3, 5]
    stored = headers_of(p.log)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in stored] == [
        (0, 2, 3),
        (3, 4, 3),
    ]
    assert [o for o, _ in values_of(log_bytes(p.log))] == [0, 1, 2, 3, 4]
    assert p.log.leader_epochs.entries == [(3, 0)]


def test_a_new_leader_epoch_starts_at_the_log_end(tmp_path):
    p = single_leader(tmp_path)
    p.append_as_leader(batch(4), 1, NOW)
    elect([p], 1, 2)  # re-elected: a new epoch, nothing written in it yet
    assert p.log.leader_epochs.entries == [(1, 0), (2, 4)]
    assert p.end_offset_for_epoch(1, -1) == (1, 4)
    assert p.end_offset_for_epoch(2, 2) == (2, 4)
    p.append_as_leader(batch(1), 1, NOW)
    assert p.end_offset_for_epoch(2, -1) == (2, 5)
    assert p.end_offset_for_epoch(7, -1) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    assert headers_of(p.log)[-1].partition_leader_epoch == 2


def test_acks_all_is_refused_while_the_isr_is_below_min_insync_replicas(tmp_path):
    rs = replicas(tmp_path, settings=topic_settings(min_isr=2))
    leader = rs[1]
    elect(rs.values(), 1, 1, isr=(1,))
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(), -1, NOW)
    assert leader.log.log_end_offset == 0 and headers_of(leader.log) == []
    # acks=1 (and 0) are taken; the high watermark does not move below min.insync.replicas.
    assert leader.append_as_leader(batch(2), 1, NOW).next_offset == 2
    assert leader.append_as_leader(batch(1), 0, NOW).next_offset == 3
    assert leader.high_watermark == 0
    # The ISR grows to 2: acks=all is accepted again.
    elect(rs.values(), 1, 1, isr=(1, 2), partition_epoch=2)
    assert leader.append_as_leader(batch(), -1, NOW).next_offset == 4


def test_below_min_insync_replicas_a_retry_of_written_batches_is_answered_as_written(tmp_path):
    # NOT_ENOUGH_REPLICAS says nothing was written. A retry of batches the log holds is
    # answered as that duplicate instead (the acks=all wait then fails it
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND: possibly written): told "not written", librdkafka
    # renumbered such records under a new epoch and wrote them twice.
    rs = replicas(tmp_path, settings=topic_settings(min_isr=2))
    leader = rs[1]
    elect(rs.values(), 1, 1, isr=(1, 2))
    first, second = batch(2, pid=7, pepoch=0, seq=0), batch(1, pid=7, pepoch=0, seq=2)
    leader.append_as_leader(first, -1, NOW)
    leader.append_as_leader(second, -1, NOW)
    elect(rs.values(), 1, 1, isr=(1,), partition_epoch=2)
    again = leader.append_as_leader(first, -1, NOW)
    assert again.duplicate and (again.base_offset, again.next_offset) == (0, 2)
    assert leader.append_as_leader(second, -1, NOW).base_offset == 2
    # Anything else is still refused, and leaves the producer's state as it was.
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(pid=7, pepoch=0, seq=3), -1, NOW)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(pid=7, pepoch=0, seq=9), -1, NOW)
    assert leader.log.log_end_offset == 3
    elect(rs.values(), 1, 1, isr=(1, 2), partition_epoch=3)
    assert leader.append_as_leader(batch(pid=7, pepoch=0, seq=3), -1, NOW).base_offset == 3


def below_min_insync_after_two_records(
    tmp_path: os.PathLike[str],
) -> tuple[dict[int, Partition], Partition]:
    """Broker 1 leads with min.insync.replicas=2; producer 7 (epoch 0) wrote sequences 0-1
    (offsets 0-1) with acks=all; then the ISR shrank to the leader alone (partition epoch 2)."""
    rs = replicas(tmp_path, settings=topic_settings(min_isr=2))
    leader = rs[1]
    elect(rs.values(), 1, 1, isr=(1, 2))
    leader.append_as_leader(batch(2, pid=7, pepoch=0, seq=0), -1, NOW)
    elect(rs.values(), 1, 1, isr=(1,), partition_epoch=2)
    return rs, leader


def test_a_batch_behind_one_refused_below_min_insync_is_refused_the_same_not_out_of_order(
    tmp_path,
):
    # A producer's pipelined request met the gap its refused predecessor left after the ISR
    # grew back: OUT_OF_ORDER_SEQUENCE_NUMBER made librdkafka bump its epoch and write
    # records twice (broker/refused_sequences.py). The leader answers its own refusal again.
    rs, leader = below_min_insync_after_two_records(tmp_path)
    first, second = batch(2, pid=7, pepoch=0, seq=2), batch(3, pid=7, pepoch=0, seq=4)
    newcomer = batch(1, pid=8, pepoch=0, seq=0)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, first, -1, NOW)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, newcomer, -1, NOW)
    elect(rs.values(), 1, 1, isr=(1, 2), partition_epoch=3)
    err = refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, second, -1, NOW + 5)
    assert "sequence 2" in err.message and "5 ms ago" in err.message
    # A producer the log has no record of yet: the same, not UNKNOWN_PRODUCER_ID.
    behind_newcomer = batch(1, pid=8, pepoch=0, seq=1)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, behind_newcomer, -1, NOW)
    assert leader.log.log_end_offset == 2
    # The retries, in order, are written in order; the gaps are closed.
    assert leader.append_as_leader(first, -1, NOW).base_offset == 2
    assert leader.append_as_leader(second, -1, NOW).base_offset == 4
    assert leader.append_as_leader(newcomer, -1, NOW).base_offset == 7
    assert leader.append_as_leader(behind_newcomer, -1, NOW).base_offset == 8
    # A gap of the producer's own making is still out of order.
    refused(
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        leader.append_as_leader,
        batch(pid=7, pepoch=0, seq=9),
        -1,
        NOW,
    )


def test_a_refusal_below_min_insync_explains_a_gap_only_for_a_while_and_in_its_leader_epoch(
    tmp_path,
):
    rs, leader = below_min_insync_after_two_records(tmp_path)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(pid=7, pepoch=0, seq=2), -1, NOW)
    elect(rs.values(), 1, 1, isr=(1, 2), partition_epoch=3)
    behind = batch(pid=7, pepoch=0, seq=3)
    # The producer gave the refused batch up (its delivery timed out): Kafka's answer again.
    later = NOW + REFUSAL_MEMORY_MS + 1
    refused("OUT_OF_ORDER_SEQUENCE_NUMBER", leader.append_as_leader, behind, -1, later)
    # A new leader epoch forgets the refusals of the one before.
    elect(rs.values(), 1, 1, isr=(1,), partition_epoch=4)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(pid=7, pepoch=0, seq=2), -1, NOW)
    elect(rs.values(), 1, 2, isr=(1, 2), partition_epoch=5)
    refused("OUT_OF_ORDER_SEQUENCE_NUMBER", leader.append_as_leader, behind, -1, NOW)
    # A newer producer epoch is not explained by the old epoch's refusal.
    elect(rs.values(), 1, 2, isr=(1,), partition_epoch=6)
    refused("NOT_ENOUGH_REPLICAS", leader.append_as_leader, batch(pid=7, pepoch=0, seq=2), -1, NOW)
    elect(rs.values(), 1, 2, isr=(1, 2), partition_epoch=7)
    bumped = batch(pid=7, pepoch=1, seq=1)
    refused("OUT_OF_ORDER_SEQUENCE_NUMBER", leader.append_as_leader, bumped, -1, NOW)
    assert leader.log.log_end_offset == 2


def test_a_follower_refuses_leader_requests(tmp_path):
    rs = replicas(tmp_path)
    follower = rs[2]
    refused("NOT_LEADER_OR_FOLLOWER", follower.append_as_leader, batch(), 1, NOW)  # no metadata
    elect(rs.values(), 1, 1)
    assert not follower.is_leader and follower.leader_id == 1
    err = refused("NOT_LEADER_OR_FOLLOWER", follower.append_as_leader, batch(), 1, NOW)
    assert "broker 1" in err.message
    refused("NOT_LEADER_OR_FOLLOWER", follower.read_for_consumer, 0, BIG)
    refused("NOT_LEADER_OR_FOLLOWER", follower.read_for_follower, 3, 0, -1, 1, BIG, NOW)
    refused("NOT_LEADER_OR_FOLLOWER", follower.delete_records_before, 0)
    refused("NOT_LEADER_OR_FOLLOWER", follower.end_offset_for_epoch, 1, 1)
    assert follower.log.log_end_offset == 0
    # A leader that loses the leadership refuses from then on.
    rs[1].append_as_leader(batch(), 1, NOW)
    elect(rs.values(), 2, 2)
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].append_as_leader, batch(), 1, NOW)
    assert rs[1].log.log_end_offset == 1


def test_requests_carrying_another_leader_epoch_are_fenced_or_unknown(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 5)
    leader = rs[1]
    leader.append_as_leader(batch(2), 1, NOW)
    refused("FENCED_LEADER_EPOCH", leader.read_for_consumer, 0, BIG, 4)
    refused("UNKNOWN_LEADER_EPOCH", leader.read_for_consumer, 0, BIG, 6)
    refused("FENCED_LEADER_EPOCH", leader.read_for_follower, 2, 0, -1, 4, BIG, NOW)
    refused("UNKNOWN_LEADER_EPOCH", leader.read_for_follower, 2, 0, -1, 6, BIG, NOW)
    refused("FENCED_LEADER_EPOCH", leader.end_offset_for_epoch, 5, 0)
    refused("UNKNOWN_LEADER_EPOCH", leader.check_leader, 9)
    # The current epoch and "no epoch" (-1) are served.
    assert leader.read_for_consumer(0, BIG, 5) == leader.read_for_consumer(0, BIG, -1)
    assert leader.read_for_follower(2, 0, -1, 5, BIG, NOW).records
    # A follower's check_epoch uses the epoch it learnt too.
    rs[2].check_epoch(5)
    refused("FENCED_LEADER_EPOCH", rs[2].check_epoch, 4)


def test_a_request_of_several_batches_gets_consecutive_offsets(tmp_path):
    p = single_leader(tmp_path)
    p.append_as_leader(batch(2), 1, NOW)
    info = p.append_as_leader(batch(3) + batch(1) + batch(2), 1, NOW)
    assert (info.base_offset, info.next_offset) == (2, 8)
    assert [(h.base_offset, h.last_offset) for h in headers_of(p.log)] == [
        (0, 1),
        (2, 4),
        (5, 5),
        (6, 7),
    ]


# --- leader: produce checks ------------------------------------------------------------------


def corrupt(data: bytes, at: int) -> bytes:
    buf = bytearray(data)
    buf[at] ^= 0x01
    return bytes(buf)


@pytest.mark.parametrize("log_append_time", [False, True])
def test_corrupt_and_truncated_batches_are_refused_and_nothing_is_written(
    tmp_path, log_append_time
):
    p = single_leader(tmp_path, topic_settings(log_append_time=log_append_time))
    p.append_as_leader(batch(2), 1, NOW)
    good = batch(3, size=20)
    cases = {
        "payload bit": corrupt(good, len(good) - 3),
        "header bit": corrupt(good, 30),  # lastOffsetDelta... inside the CRC
        "cut short": good[:-5],
        "header cut short": good[:40],
        "good then garbage": good + b"\x00" * 7,
        "good then bad": good + corrupt(batch(1), 70),
    }
    for name, data in cases.items():
        with pytest.raises(ApiError) as info:
            p.append_as_leader(data, 1, NOW)
        assert info.value.error_name == "CORRUPT_MESSAGE", name
        assert p.log.log_end_offset == 2, name
    assert len(headers_of(p.log)) == 1
    refused("INVALID_RECORD", p.append_as_leader, b"", 1, NOW)  # no batch at all


def test_a_bad_magic_is_an_invalid_record(tmp_path):
    # Kafka's ProduceRequest.validateRecords answers INVALID_RECORD, before any CRC check.
    p = single_leader(tmp_path)
    data = bytearray(batch())
    data[16] = 1  # magic v1
    refused("INVALID_RECORD", p.append_as_leader, bytes(data), 1, NOW)
    assert p.log.log_end_offset == 0


def test_control_and_transactional_batches_are_invalid(tmp_path):
    p = single_leader(tmp_path)
    refused("INVALID_RECORD", p.append_as_leader, batch(control=True), 1, NOW)
    tx = batch(pid=7, pepoch=0, seq=0, transactional=True)
    refused("INVALID_RECORD", p.append_as_leader, tx, 1, NOW)
    # One bad batch among good ones refuses the whole request.
    refused("INVALID_RECORD", p.append_as_leader, batch() + batch(control=True), 1, NOW)
    assert p.log.log_end_offset == 0
    assert p.producers.producers == {}


def test_a_record_count_that_disagrees_with_the_offset_delta_is_invalid(tmp_path):
    p = single_leader(tmp_path)
    records = [Record(0, NOW, None, b"a"), Record(1, NOW, None, b"b")]
    gappy = encode_batch(records, base_offset=0, last_offset=4)  # 2 records, delta 4
    refused("INVALID_RECORD", p.append_as_leader, gappy, 1, NOW)
    assert p.log.log_end_offset == 0


def test_create_time_timestamps_must_fall_within_the_topic_bounds(tmp_path):
    # From the topic's configs as the metadata gives them (Kafka's names).
    settings = TopicSettings.from_configs(
        {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"}
    )
    p = single_leader(tmp_path, settings)
    for data in (
        batch(ts=NOW - 1_001),
        batch(ts=NOW + 501),
        batch(2, ts=NOW, max_ts=NOW + 501),  # the newest record is checked, not only the first
        batch(2, ts=NOW - 1_001, max_ts=NOW),
        batch() + batch(ts=NOW - 5_000),
    ):
        refused("INVALID_TIMESTAMP", p.append_as_leader, data, 1, NOW)
        assert p.log.log_end_offset == 0
    # The bounds themselves are inside, and -1 (no timestamp) is not checked.
    assert p.append_as_leader(batch(ts=NOW - 1_000), 1, NOW).next_offset == 1
    assert p.append_as_leader(batch(ts=NOW + 500), 1, NOW).next_offset == 2
    assert p.append_as_leader(batch(ts=-1), 1, NOW).next_offset == 3
    # The check is against the time the caller passes, not a clock.
    assert p.append_as_leader(batch(ts=NOW + 5_000), 1, NOW + 4_600).next_offset == 4


def test_a_negative_timestamp_other_than_none_is_out_of_bounds(tmp_path):
    p = single_leader(tmp_path, topic_settings(timestamp_before_max_ms=1_000))
    refused("INVALID_TIMESTAMP", p.append_as_leader, batch(ts=-5), 1, NOW)


def test_log_append_time_topics_stamp_the_batch_with_a_valid_crc(tmp_path):
    settings = topic_settings(
        log_append_time=True, timestamp_before_max_ms=10, timestamp_after_max_ms=10
    )
    p = single_leader(tmp_path, settings)
    now = NOW + 60_000
    # Timestamp bounds do not apply: the broker's time replaces the producer's.
    sent = batch(3, ts=NOW - 86_400_000, compression_codec=compression.GZIP) + batch(1, ts=NOW)
    info = p.append_as_leader(sent, 1, now)
    assert info.log_append_time_ms == now and info.next_offset == 4
    stored = log_bytes(p.log)
    stamped = [h for _, h in iter_batches(stored)]  # iter_batches checks every CRC
    assert [h.compression for h in stamped] == [compression.GZIP, compression.NONE]
    for pos, header in iter_batches(stored):
        assert header.attributes & TIMESTAMP_TYPE_BIT
        assert header.log_append_time and header.max_timestamp == now
        assert validate_batch(stored, pos) == header
    for _, records in decode_batches(stored):
        assert {r.timestamp for r in records} == {now}
    # The records themselves are untouched.
    assert [v for _, v in values_of(stored)] == [v for _, v in values_of(sent)]


def test_an_oversize_batch_is_refused(tmp_path):
    settings = topic_settings(log=log_config(max_message_bytes=300))
    p = single_leader(tmp_path, settings)
    small = batch(size=50)
    assert len(small) <= 300
    p.append_as_leader(small, 1, NOW)
    big = batch(size=400)
    refused("MESSAGE_TOO_LARGE", p.append_as_leader, big, 1, NOW)
    refused("MESSAGE_TOO_LARGE", p.append_as_leader, batch(size=10) + big, 1, NOW)
    assert p.log.log_end_offset == 1


def test_a_batch_larger_than_a_segment_is_refused(tmp_path):
    settings = topic_settings(log=log_config(segment_bytes=256))
    p = single_leader(tmp_path, settings)
    refused("MESSAGE_TOO_LARGE", p.append_as_leader, batch(size=300), 1, NOW)
    assert p.log.log_end_offset == 0


# --- idempotent producers --------------------------------------------------------------------


def test_a_retried_batch_is_answered_with_its_original_offsets(tmp_path):
    p = single_leader(tmp_path)
    changes = []
    p.on_change = lambda: changes.append(1)
    b0 = batch(3, pid=42, pepoch=0, seq=0)
    b1 = batch(2, pid=42, pepoch=0, seq=3)
    p.append_as_leader(batch(1), 1, NOW)  # someone else's record first: offsets are not seqs
    assert p.append_as_leader(b0, 1, NOW).base_offset == 1
    assert p.append_as_leader(b1, 1, NOW).base_offset == 4
    before = log_bytes(p.log)
    changes.clear()

    again = p.append_as_leader(b0, 1, NOW)
    assert again.duplicate and (again.base_offset, again.next_offset) == (1, 4)
    again = p.append_as_leader(b1, -1, NOW)
    assert again.duplicate and (again.base_offset, again.next_offset) == (4, 6)
    assert again.leader_epoch == 1
    assert log_bytes(p.log) == before and changes == []
    # The next batch in sequence is written.
    assert not p.append_as_leader(batch(1, pid=42, pepoch=0, seq=5), 1, NOW).duplicate
    assert p.log.log_end_offset == 7


def test_only_the_last_25_batches_are_remembered(tmp_path):
    """As many as Strom's producer may have of a partition in flight (Kafka's leader: 5)."""
    p = single_leader(tmp_path)
    sent = [batch(1, pid=9, pepoch=0, seq=s) for s in range(27)]
    for b in sent:
        p.append_as_leader(b, 1, NOW)
    for s in range(2, 27):
        assert p.append_as_leader(sent[s], 1, NOW).base_offset == s
    refused("OUT_OF_ORDER_SEQUENCE_NUMBER", p.append_as_leader, sent[1], 1, NOW)
    assert p.log.log_end_offset == 27


def test_sequence_and_epoch_errors(tmp_path):
    p = single_leader(tmp_path)
    p.append_as_leader(batch(3, pid=5, pepoch=2, seq=0), 1, NOW)
    refused(
        "OUT_OF_ORDER_SEQUENCE_NUMBER", p.append_as_leader, batch(pid=5, pepoch=2, seq=4), 1, NOW
    )
    refused(
        "OUT_OF_ORDER_SEQUENCE_NUMBER", p.append_as_leader, batch(pid=5, pepoch=2, seq=2), 1, NOW
    )
    refused("INVALID_PRODUCER_EPOCH", p.append_as_leader, batch(pid=5, pepoch=1, seq=3), 1, NOW)
    refused(
        "OUT_OF_ORDER_SEQUENCE_NUMBER", p.append_as_leader, batch(pid=5, pepoch=3, seq=3), 1, NOW
    )
    refused("UNKNOWN_PRODUCER_ID", p.append_as_leader, batch(pid=6, pepoch=0, seq=8), 1, NOW)
    assert p.log.log_end_offset == 3
    # A new epoch starting at 0, and a new producer starting at 0, are fine.
    assert p.append_as_leader(batch(pid=5, pepoch=3, seq=0), 1, NOW).base_offset == 3
    assert p.append_as_leader(batch(pid=6, pepoch=0, seq=0), 1, NOW).base_offset == 4
    refused("INVALID_PRODUCER_EPOCH", p.append_as_leader, batch(pid=5, pepoch=2, seq=3), 1, NOW)


@pytest.mark.parametrize("snapshot", ["none", "at-end", "midway"])
def test_producer_state_survives_a_restart(tmp_path, snapshot):
    p = single_leader(tmp_path)
    sent = []
    for s in range(4):
        p.append_as_leader(batch(1), 1, NOW)  # non-idempotent records in between
        b = batch(2, pid=77, pepoch=1, seq=2 * s)
        sent.append((b, p.append_as_leader(b, 1, NOW)))
        if snapshot == "midway" and s == 1:
            p.snapshot_producers()
    if snapshot == "at-end":
        p.snapshot_producers()
    if snapshot != "none":
        assert producer_snapshots.snapshot_offsets(p.log.directory)
    end = p.log.log_end_offset

    p = reopen(p)
    elect([p], 1, 2)
    assert p.log.log_end_offset == end
    for b, original in sent:
        again = p.append_as_leader(b, 1, NOW)
        assert again.duplicate, (snapshot, original)
        assert (again.base_offset, again.next_offset) == (
            original.base_offset,
            original.next_offset,
        )
    assert p.log.log_end_offset == end
    refused(
        "OUT_OF_ORDER_SEQUENCE_NUMBER", p.append_as_leader, batch(pid=77, pepoch=1, seq=9), 1, NOW
    )
    refused("INVALID_PRODUCER_EPOCH", p.append_as_leader, batch(pid=77, pepoch=0, seq=8), 1, NOW)
    assert p.append_as_leader(batch(pid=77, pepoch=1, seq=8), 1, NOW).base_offset == end


def test_a_damaged_snapshot_falls_back_to_replaying_the_log(tmp_path):
    p = single_leader(tmp_path)
    b = batch(1, pid=3, pepoch=0, seq=0)
    p.append_as_leader(b, 1, NOW)
    p.snapshot_producers()
    path = producer_snapshots.path_of(p.log.directory, 1)
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(b"X")
    p = reopen(p)
    elect([p], 1, 2)
    assert p.append_as_leader(b, 1, NOW).duplicate


def test_followers_replay_producer_state_so_a_new_leader_spots_retries(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    b0 = batch(2, pid=11, pepoch=0, seq=0)
    b1 = batch(2, pid=11, pepoch=0, seq=2)
    rs[1].append_as_leader(batch(1), 1, NOW)
    rs[1].append_as_leader(b0, 1, NOW)
    rs[1].append_as_leader(b1, 1, NOW)
    sync_all(rs[1], [rs[2]])
    elect(rs.values(), 2, 2)
    again = rs[2].append_as_leader(b1, 1, NOW)
    assert again.duplicate and (again.base_offset, again.next_offset) == (3, 5)
    assert rs[2].append_as_leader(batch(pid=11, pepoch=0, seq=4), 1, NOW).base_offset == 5


def test_a_retry_on_a_log_append_time_topic_reports_the_original_append_time(tmp_path):
    p = single_leader(tmp_path, topic_settings(log_append_time=True))
    b = batch(2, ts=NOW - 5_000, pid=1, pepoch=0, seq=0)
    first = p.append_as_leader(b, 1, NOW)
    assert first.log_append_time_ms == NOW
    assert headers_of(p.log)[0].max_timestamp == NOW
    again = p.append_as_leader(b, 1, NOW + 1_000)
    assert again.duplicate
    assert again.log_append_time_ms == NOW  # as Kafka: the retry gets the original's time


def test_a_corrupted_batch_is_never_taken_for_a_retry(tmp_path):
    p = single_leader(tmp_path)
    p.append_as_leader(batch(1, pid=8, pepoch=0, seq=0), 1, NOW)
    # The producer's next batch (seq 1) is damaged in flight: its baseSequence reads 0.
    damaged = bytearray(batch(1, pid=8, pepoch=0, seq=1))
    damaged[56] ^= 0x01  # low byte of baseSequence (bytes 53-56), inside the CRC
    assert parse_header(damaged).base_sequence == 0
    refused("CORRUPT_MESSAGE", p.append_as_leader, bytes(damaged), 1, NOW)


def test_several_in_order_batches_of_one_producer_in_one_request(tmp_path):
    p = single_leader(tmp_path)
    info = p.append_as_leader(
        batch(2, pid=4, pepoch=0, seq=0) + batch(1, pid=4, pepoch=0, seq=2), 1, NOW
    )
    assert (info.base_offset, info.next_offset) == (0, 3)
    info = p.append_as_leader(
        batch(1, pid=4, pepoch=0, seq=3) + batch(1, pid=4, pepoch=0, seq=4), 1, NOW
    )
    assert (info.base_offset, info.next_offset) == (3, 5)


def test_truncation_keeps_what_the_log_still_says_about_a_producer(tmp_path):
    rs = replicas(tmp_path)
    elect(rs.values(), 1, 1)
    sent = [batch(1, pid=21, pepoch=0, seq=s) for s in range(10)]
    for b in sent[:5]:
        rs[1].append_as_leader(b, 1, NOW)
    sync_all(rs[1], [rs[2], rs[3]])
    for b in sent[5:]:
        rs[1].append_as_leader(b, 1, NOW)
    catch_up(rs[2], rs[1])  # 2 has offsets 5-9, 3 does not: they are not committed
    assert rs[1].high_watermark == 5
    elect(rs.values(), 3, 2)  # 3 is in the ISR and has everything below the HW
    catch_up(rs[2], rs[3])  # 2 drops offsets 5-9
    assert log_bytes(rs[2].log) == log_bytes(rs[3].log)
    elect(rs.values(), 2, 3)
    # Replica 3 would take the producer's retry of seq 5 (it follows seq 4 at offset 4);
    # replica 2 holds the same log and must answer the same.
    info = rs[2].append_as_leader(sent[5], -1, NOW)
    assert not info.duplicate and info.base_offset == 5


def test_a_snapshot_past_the_log_end_after_a_crash_is_not_used_later(tmp_path):
    p = single_leader(tmp_path)
    for s in range(3):
        p.append_as_leader(batch(1, pid=1, pepoch=0, seq=s), 1, NOW)
    lost = headers_of(p.log)[-1]
    p.snapshot_producers()  # durable (fsynced) at offset 3 ...
    p.log.close()
    # ... but the log's tail was not: the crash loses offset 2.
    segment = os.path.join(p.log.directory, f"{0:020d}.log")
    os.truncate(segment, os.path.getsize(segment) - lost.size)
    p = open_partition(p.log.directory, 1, p.settings)
    elect([p], 1, 2)
    assert p.log.log_end_offset == 2
    # Another producer writes offsets 2 and 3; the broker restarts again.
    p.append_as_leader(batch(1, pid=2, pepoch=0, seq=0), 1, NOW)
    p.append_as_leader(batch(1, pid=2, pepoch=0, seq=1), 1, NOW)
    p = reopen(p)
    elect([p], 1, 3)
    # Producer 1 retries seq 2, lost in the crash: it must be written, not acked as offset 2.
    info = p.append_as_leader(batch(1, pid=1, pepoch=0, seq=2), 1, NOW)
    assert not info.duplicate and info.base_offset == 4


# --- high watermark and consumers -------------------------------------------------------------


def test_the_hw_follows_the_slowest_isr_member_and_consumers_stop_below_it(tmp_path):
    rs = replicas(tmp_path, settings=topic_settings(min_isr=2))
    elect(rs.values(), 1, 1)
    leader = rs[1]
    for _ in range(3):
        leader.append_as_leader(batch(2), -1, NOW)
    assert leader.log.log_end_offset == 6 and leader.high_watermark == 0

    catch_up(rs[2], leader)  # 2 fetched up to 6; 3 has fetched nothing
    assert leader.high_watermark == 0
    assert leader.read_for_consumer(0, BIG) == b""

    fetch_once(rs[3], leader, max_bytes=1)  # one batch (min one)
    assert leader.high_watermark == 0  # the leader learns 3's end at its next fetch
    fetch_once(rs[3], leader, max_bytes=1)
    assert leader.high_watermark == 2
    assert [h.last_offset for _, h in iter_batches(leader.read_for_consumer(0, BIG))] == [1]
    assert leader.read_for_consumer(2, BIG) == b""

    catch_up(rs[3], leader)
    assert leader.high_watermark == 6
    assert len(list(iter_batches(leader.read_for_consumer(0, BIG)))) == 3


def test_consumer_reads_never_reach_the_hw(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    leader = rs[1]
    for n in (1, 3, 2, 1, 4):
        leader.append_as_leader(batch(n), 1, NOW)
    for max_bytes in (1, BIG):
        while rs[2].log.log_end_offset < leader.log.log_end_offset:
            fetch_once(rs[2], leader, max_bytes=max_bytes)
            hw = leader.high_watermark
            for offset in range(leader.log.log_end_offset + 1):
                data = leader.read_for_consumer(offset, BIG)
                assert all(h.last_offset < hw for _, h in iter_batches(data))
                if offset < hw:
                    assert data and parse_header(data).base_offset <= offset
                else:
                    assert data == b""
        fetch_once(rs[2], leader)
    assert leader.high_watermark == leader.log.log_end_offset == 11
    # max_bytes too small still returns one whole batch.
    one = leader.read_for_consumer(4, 1)
    assert [(h.base_offset, h.last_offset) for _, h in iter_batches(one)] == [(4, 5)]


def test_a_single_replica_isr_advances_the_hw_on_append(tmp_path):
    p = single_leader(tmp_path)
    p.append_as_leader(batch(3), 1, NOW)
    assert p.high_watermark == 3
    rs = replicas(tmp_path / "more", settings=topic_settings(min_isr=1))
    elect(rs.values(), 1, 1, isr=(1,))  # replicas 1, 2, 3 but only the leader in sync
    rs[1].append_as_leader(batch(2), -1, NOW)
    assert rs[1].high_watermark == 2
    fetch_once(rs[2], rs[1])  # an out-of-sync follower's fetch does not hold it back
    rs[1].append_as_leader(batch(2), 1, NOW)
    assert rs[1].high_watermark == 4


def test_the_hw_stands_still_below_min_insync_replicas(tmp_path):
    rs = replicas(tmp_path, (1, 2), settings=topic_settings(min_isr=2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(2), -1, NOW)
    catch_up(rs[2], rs[1])
    assert rs[1].high_watermark == 2
    elect(rs.values(), 1, 1, isr=(1,), partition_epoch=2)  # the ISR shrinks below min
    rs[1].append_as_leader(batch(2), 1, NOW)
    catch_up(rs[2], rs[1])
    assert rs[1].high_watermark == 2
    refused("NOT_ENOUGH_REPLICAS", rs[1].append_as_leader, batch(), -1, NOW)
    rs[1].isr_committed((1, 2), 3)  # the controller accepted 2 back
    assert rs[1].high_watermark == 4 and rs[1].isr == (1, 2)
    rs[1].isr_committed((1,), 3)  # a stale answer is ignored
    assert rs[1].isr == (1, 2)


def test_an_isr_shrink_from_the_metadata_lets_the_hw_pass_a_lagging_follower(tmp_path):
    rs = replicas(tmp_path)
    elect(rs.values(), 1, 1)
    leader = rs[1]
    leader.append_as_leader(batch(4), 1, NOW)
    catch_up(rs[2], leader)
    assert leader.high_watermark == 0
    changed = []
    leader.on_change = lambda: changed.append(1)
    # Same leader epoch, newer partition epoch: not a role change, the HW moves.
    assert (
        leader.apply_registration(
            registration(1, 1, (1, 2), partition_epoch=2), NOW, leader.settings
        )
        is False
    )
    assert changed and leader.high_watermark == 4
    # The lagging follower can still fetch (it is a replica) and is proposed back in later.
    catch_up(rs[3], leader)
    change = leader.isr_change_needed(NOW + 1, lambda _: True)
    assert change is not None and change.added == (3,)
    assert rs[2].isr_change_needed(NOW, lambda _: True) is None


def test_a_lagging_follower_is_proposed_out_of_the_isr(tmp_path):
    rs = replicas(tmp_path)
    for p in rs.values():
        p.replica_lag_time_max_ms = 1_000
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(2), 1, NOW)
    catch_up(rs[2], rs[1])
    fetch_once(rs[2], rs[1], now=NOW + 900)  # 2 is caught up at NOW + 900, 3 never fetched
    assert rs[1].isr_change_needed(NOW + 500, lambda _: True) is None
    change = rs[1].isr_change_needed(NOW + 1_001, lambda _: True)
    assert change is not None and change.removed == (3,) and change.isr == (1, 2)
    rs[1].isr_refused()
    assert rs[1].isr_change_needed(NOW + 1_001, lambda _: True) == change


def test_a_new_leader_starts_from_its_own_hw_and_waits_for_every_isr_member(tmp_path):
    rs = replicas(tmp_path)
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(3), 1, NOW)
    sync_all(rs[1], [rs[2], rs[3]])
    assert [p.high_watermark for p in rs.values()] == [3, 3, 3]
    rs[1].append_as_leader(batch(3), 1, NOW)
    sync_all(rs[1], [rs[2], rs[3]])
    catch_up(rs[3], rs[1])
    elect(rs.values(), 2, 2)
    assert rs[2].high_watermark == 6
    rs[2].append_as_leader(batch(1), 1, NOW)
    catch_up(rs[1], rs[2])
    assert rs[2].high_watermark == 6  # 3 has not fetched from the new leader yet
    catch_up(rs[3], rs[2])
    assert rs[2].high_watermark == 7


# --- followers ---------------------------------------------------------------------------------


def test_a_follower_copies_the_leaders_bytes_verbatim(tmp_path):
    rs = replicas(tmp_path, (1, 2), topic_settings(log_append_time=True))
    elect(rs.values(), 1, 4)
    leader, follower = rs[1], rs[2]
    leader.append_as_leader(batch(3, compression_codec=compression.GZIP), 1, NOW)
    leader.append_as_leader(batch(2, pid=3, pepoch=0, seq=0), 1, NOW + 1)
    leader.append_as_leader(batch(1) + batch(4, compression_codec=compression.LZ4), 1, NOW + 2)
    changes = []
    follower.on_change = lambda: changes.append(follower.log.log_end_offset)

    answer = fetch_once(follower, leader, max_bytes=1)
    assert answer.diverging is None and answer.log_end_offset == 10
    assert answer.records == log_bytes(leader.log, 3)
    assert follower.log.log_end_offset == 3 and follower.high_watermark == 0
    catch_up(follower, leader)
    assert log_bytes(follower.log) == log_bytes(leader.log)
    assert follower.log.leader_epochs.entries == leader.log.leader_epochs.entries == [(4, 0)]
    assert follower.producers.producers.keys() == {3}
    assert changes
    # The follower learnt the HW the leader had when it answered; the next fetch brings 10.
    assert follower.high_watermark <= leader.high_watermark == 10
    fetch_once(follower, leader)
    assert follower.high_watermark == 10


def test_a_follower_takes_the_hw_capped_at_its_own_log_end(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1, isr=(1,))  # 2 out of sync: the HW follows the leader alone
    for _ in range(4):
        rs[1].append_as_leader(batch(2), 1, NOW)
    assert rs[1].high_watermark == 8
    for end in (2, 4, 6, 8):
        fetch_once(rs[2], rs[1], max_bytes=1)
        assert rs[2].log.log_end_offset == end
        assert rs[2].high_watermark == end  # min(leader HW 8, its own log end)
    # Directly: an answer's HW above the log end is capped, below it is taken.
    rs[2].append_as_follower(b"", 100, 0)
    assert rs[2].high_watermark == 8


def test_a_follower_learns_the_log_start_but_not_past_its_hw(tmp_path):
    rs = replicas(tmp_path, (1, 2), topic_settings(log=log_config(segment_bytes=200)))
    elect(rs.values(), 1, 1)
    leader, follower = rs[1], rs[2]
    for _ in range(6):
        leader.append_as_leader(batch(2, size=40), 1, NOW)
    sync_all(leader, [follower])
    assert leader.high_watermark == follower.high_watermark == 12
    assert len(leader.log.segments) > 2
    assert leader.delete_records_before(5) == 5
    fetch_once(follower, leader)
    assert follower.log.log_start_offset == 5
    assert len(follower.log.segments) < 6
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_consumer, 4, BIG)
    # Directly: a log start above the follower's HW is capped at it.
    follower.append_as_follower(b"", 12, 20)
    assert follower.log.log_start_offset == 12 == follower.log.log_end_offset


def test_a_follower_refuses_overlapping_or_corrupt_fetched_bytes(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(2), 1, NOW)
    catch_up(rs[2], rs[1])
    again = log_bytes(rs[1].log)
    refused("INVALID_RECORD", rs[2].append_as_follower, again, 2, 0)
    rs[1].append_as_leader(batch(2), 1, NOW)
    more = rs[1].read_for_follower(2, 2, 1, 1, BIG, NOW).records
    refused("CORRUPT_MESSAGE", rs[2].append_as_follower, corrupt(more, 40), 4, 0)
    assert rs[2].log.log_end_offset == 2


def test_a_follower_fetch_of_someone_not_a_replica_is_refused(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].read_for_follower, 3, 0, -1, 1, BIG, NOW)
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].read_for_follower, 1, 0, -1, 1, BIG, NOW)


def test_apply_registration_reports_role_and_leader_changes(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    p = rs[1]
    calls = []
    p.on_change = lambda: calls.append(1)
    assert p.apply_registration(registration(2, 1, (1, 2), (1, 2)), NOW, p.settings) is True
    assert not p.is_leader and p.leader_id == 2 and p.leader_epoch == 1
    assert p.apply_registration(registration(2, 1, (2,), (1, 2), 2), NOW, p.settings) is False
    assert p.isr == (2,) and p.partition_epoch == 2
    assert p.apply_registration(registration(1, 2, (1, 2), (1, 2)), NOW, p.settings) is True
    assert p.is_leader and p.leader is not None and p.leader.leader_epoch == 2
    # The same registration again changes nothing.
    assert p.apply_registration(registration(1, 2, (1, 2), (1, 2)), NOW, p.settings) is False
    assert len(calls) == 4
    # New settings are taken on any registration.
    tighter = topic_settings(min_isr=2)
    p.apply_registration(registration(1, 2, (1, 2), (1, 2)), NOW, tighter)
    assert p.settings is tighter


def test_a_reassignment_adds_and_removes_followers(tmp_path):
    rs = replicas(tmp_path)
    elect(list(rs.values())[:2], 1, 1, replicas=(1, 2))
    rs[1].append_as_leader(batch(2), 1, NOW)
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].read_for_follower, 3, 0, -1, 1, BIG, NOW)
    elect(rs.values(), 1, 1, replicas=(1, 2, 3), isr=(1, 2), partition_epoch=2)
    catch_up(rs[3], rs[1])
    assert log_bytes(rs[3].log) == log_bytes(rs[1].log)
    elect([rs[1], rs[3]], 1, 1, replicas=(1, 3), isr=(1, 3), partition_epoch=3)
    refused("NOT_LEADER_OR_FOLLOWER", rs[1].read_for_follower, 2, 2, 1, 1, BIG, NOW)


# --- divergence ----------------------------------------------------------------------------------


def test_a_follower_drops_uncommitted_batches_the_new_leader_never_had(tmp_path):
    """KIP-101: epoch 1's leader wrote batches only replica 2 copied; replica 3, elected for
    epoch 2, never had them. Both 2 and the old leader cut them off, not a record more."""
    rs = replicas(tmp_path)
    elect(rs.values(), 1, 1)
    old = rs[1]
    for _ in range(3):
        old.append_as_leader(batch(2), -1, NOW)
    sync_all(old, [rs[2], rs[3]])
    committed = log_bytes(old.log)
    assert old.high_watermark == 6
    for _ in range(2):
        old.append_as_leader(batch(2), 1, NOW)  # uncommitted: 3 does not fetch these
    catch_up(rs[2], old)
    assert rs[2].log.log_end_offset == 10 and old.high_watermark == 6
    hw_2 = rs[2].high_watermark

    elect(rs.values(), 3, 2)
    new = rs[3]
    new.append_as_leader(batch(3), 1, NOW)
    truncations = catch_up(rs[2], new)
    assert truncations == [((1, 6), 6)]
    assert hw_2 <= 6
    truncations = catch_up(old, new)
    assert truncations == [((1, 6), 6)]
    sync_all(new, [old, rs[2]])
    expected = log_bytes(new.log)
    assert expected.startswith(committed)
    assert log_bytes(rs[2].log) == log_bytes(old.log) == expected
    assert [h.partition_leader_epoch for h in headers_of(rs[2].log)] == [1, 1, 1, 2]
    assert rs[2].log.leader_epochs.entries == new.log.leader_epochs.entries == [(1, 0), (2, 6)]
    assert new.high_watermark == rs[2].high_watermark == 9


def test_a_follower_that_has_unacknowledged_records_keeps_them(tmp_path):
    """KIP-101's first case: the follower copied records before learning they were committed
    (its HW lags). Truncating to its HW would lose them once it leads; it must not."""
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(1), -1, NOW)
    rs[1].append_as_leader(batch(1), -1, NOW)
    fetch_once(rs[2], rs[1])  # 2 copies both records ...
    rs[1].read_for_follower(2, 2, 1, 1, BIG, NOW)  # ... its next fetch's answer is lost
    assert rs[1].high_watermark == 2 and rs[2].high_watermark == 0
    # 2 restarts (its log keeps everything) and is then elected; 1 follows it.
    rs[2] = reopen(rs[2])
    elect(rs.values(), 2, 2)
    assert rs[2].log.log_end_offset == 2
    assert catch_up(rs[1], rs[2]) == []
    rs[2].append_as_leader(batch(1), 1, NOW)
    sync_all(rs[2], [rs[1]])
    assert log_bytes(rs[1].log) == log_bytes(rs[2].log)
    assert rs[2].high_watermark == 3


def test_replicas_that_wrote_different_batches_at_the_same_offset_converge(tmp_path):
    """KIP-101's second case: the replica that missed offset 1 leads and
    writes a different batch there (it had everything below the HW, 1); the old leader's
    offset 1 (epoch 1) must go."""
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(1), 1, NOW)
    catch_up(rs[2], rs[1])
    rs[1].append_as_leader(batch(1), 1, NOW)  # only on 1
    elect(rs.values(), 2, 2)
    rs[2].append_as_leader(batch(1), 1, NOW)
    rs[2].append_as_leader(batch(1), 1, NOW)
    assert rs[1].log.log_end_offset == 2
    assert catch_up(rs[1], rs[2]) == [((1, 1), 1)]
    assert log_bytes(rs[1].log) == log_bytes(rs[2].log)
    assert [h.partition_leader_epoch for h in headers_of(rs[1].log)] == [1, 2, 2]


def test_two_leader_changes_make_the_follower_truncate_in_two_rounds(tmp_path):
    """KIP-279: the follower's last epoch (3) is unknown to the leader, which answers the
    largest epoch below it (2); the follower has no epoch 2 and cuts to where its epoch 1
    ended, then asks again with epoch 1, and is told where epoch 1 ends on the leader."""
    rs = replicas(tmp_path, (1, 2))
    f, lead = rs[1], rs[2]
    elect(rs.values(), 1, 1)
    for _ in range(5):
        f.append_as_leader(batch(1), 1, NOW)  # offsets 0-4, epoch 1
    for _ in range(4):
        fetch_once(lead, f, max_bytes=1)  # 2 copies offsets 0-3
    assert lead.log.log_end_offset == 4
    hw_f = f.high_watermark
    elect([lead], 2, 2, replicas=(1, 2))  # 1 is cut off: it neither learns epoch 2 nor fetches
    lead.append_as_leader(batch(1), 1, NOW)
    lead.append_as_leader(batch(1), 1, NOW)  # offsets 4-5, epoch 2
    elect([f], 1, 3, replicas=(1, 2))  # 1 leads again (epoch 3), 2 is cut off
    for _ in range(3):
        f.append_as_leader(batch(1), 1, NOW)  # offsets 5-7, epoch 3
    elect(rs.values(), 2, 4)
    for _ in range(4):
        lead.append_as_leader(batch(1), 1, NOW)  # offsets 6-9, epoch 4
    assert f.log.leader_epochs.entries == [(1, 0), (3, 5)]
    assert lead.log.leader_epochs.entries == [(1, 0), (2, 4), (4, 6)]

    truncations = catch_up(f, lead)
    assert truncations == [((2, 6), 5), ((1, 4), 4)]
    assert hw_f <= 4
    assert log_bytes(f.log) == log_bytes(lead.log)
    assert f.log.leader_epochs.entries == [(1, 0), (2, 4), (4, 6)]
    sync_all(lead, [f])
    assert f.high_watermark == lead.high_watermark == 10


def test_a_follower_ahead_in_the_leaders_own_epoch_is_cut_to_the_leaders_end(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(2), 1, NOW)
    catch_up(rs[2], rs[1])
    # The follower claims offsets past the leader's end in the leader's current epoch.
    answer = rs[1].read_for_follower(2, 5, 1, 1, BIG, NOW)
    assert answer.diverging == (1, 2) and answer.records == b""


def test_truncate_on_divergence_follows_kafkas_rules(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 2, 1)
    p = rs[2]
    for _ in range(6):
        p.append_as_leader(batch(1), 1, NOW)
    assert p.high_watermark == 0  # 1 never fetched
    p.log.update_high_watermark(3)
    elect(rs.values(), 1, 2)
    # An epoch we never had: cut to the leader's end for it.
    assert p.truncate_on_divergence(5, 5) == 5
    # The leader knows no end: cut to our high watermark.
    assert p.truncate_on_divergence(UNDEFINED_EPOCH, UNDEFINED_OFFSET) == 3
    # Our own epoch: the smaller of the two ends; a larger one leaves the log as it is.
    assert p.truncate_on_divergence(1, 10) == 3
    assert p.truncate_on_divergence(1, 2) == 2
    assert p.log.log_end_offset == 2 and p.high_watermark == 2


def test_a_replica_elected_without_writing_can_follow_again(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    rs[1].append_as_leader(batch(2), -1, NOW)
    sync_all(rs[1], [rs[2]])
    elect(rs.values(), 2, 2)  # 2 leads briefly and writes nothing
    assert rs[2].log.leader_epochs.entries == [(1, 0), (2, 2)]
    elect(rs.values(), 1, 3)
    rs[1].append_as_leader(batch(2), -1, NOW)
    catch_up(rs[2], rs[1])  # the fetch loop must make progress
    assert log_bytes(rs[2].log) == log_bytes(rs[1].log)


# --- offsets out of range, deleting records, starting over --------------------------------------


def test_fetch_offsets_outside_the_log_are_out_of_range(tmp_path):
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1)
    leader = rs[1]
    leader.append_as_leader(batch(3), 1, NOW)
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_consumer, 4, BIG)
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_consumer, -1, BIG)
    assert leader.read_for_consumer(3, BIG) == b""  # the log end itself is in range
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_follower, 2, 4, -1, 1, BIG, NOW)
    assert leader.read_for_follower(2, 3, -1, 1, BIG, NOW).records == b""
    assert leader.high_watermark == 3  # that fetch at 3 told the leader 2 has it all


def test_delete_records_moves_the_log_start(tmp_path):
    settings = topic_settings(log=log_config(segment_bytes=200))
    rs = replicas(tmp_path, (1, 2), settings)
    elect(rs.values(), 1, 1)
    leader = rs[1]
    for _ in range(5):
        leader.append_as_leader(batch(2, size=40), 1, NOW)
    fetch_once(rs[2], leader, max_bytes=1)
    fetch_once(rs[2], leader, max_bytes=1)
    fetch_once(rs[2], leader, max_bytes=1)
    assert leader.high_watermark == 4
    segments = len(leader.log.segments)
    calls = []
    leader.on_change = lambda: calls.append(1)

    refused("OFFSET_OUT_OF_RANGE", leader.delete_records_before, 5)  # past the HW
    assert leader.log.log_start_offset == 0
    assert leader.delete_records_before(3) == 3 and calls
    assert leader.log.log_start_offset == 3
    assert len(leader.log.segments) < segments
    refused("OFFSET_OUT_OF_RANGE", leader.read_for_consumer, 2, BIG)
    assert parse_header(leader.read_for_consumer(3, BIG)).base_offset == 2  # its whole batch
    assert leader.delete_records_before(1) == 3  # never back
    assert leader.delete_records_before(-1) == 4  # -1: up to the HW
    assert leader.log.leader_epochs.entries == [(1, 4)]
    refused("OFFSET_OUT_OF_RANGE", leader.delete_records_before, -2)


def test_a_follower_behind_the_log_start_starts_over_there(tmp_path):
    rs = replicas(tmp_path, (1, 2), topic_settings(log=log_config(segment_bytes=200)))
    elect(rs.values(), 1, 1, isr=(1,))
    leader, follower = rs[1], rs[2]
    for s in range(5):
        leader.append_as_leader(batch(2, size=40, pid=6, pepoch=0, seq=2 * s), 1, NOW)
    fetch_once(follower, leader, max_bytes=1)
    follower.snapshot_producers()
    assert leader.delete_records_before(6) == 6
    # Its fetch from 2 is below the leader's start: out of range, so it starts at 6.
    err = refused(
        "OFFSET_OUT_OF_RANGE",
        leader.read_for_follower,
        2,
        follower.log.log_end_offset,
        follower.log.leader_epochs.latest_epoch(),
        1,
        BIG,
        NOW,
    )
    assert "[6, 10]" in err.message
    follower.restart_at(leader.log.log_start_offset)
    assert follower.log.log_start_offset == follower.log.log_end_offset == 6
    assert follower.high_watermark == 6 and follower.log.leader_epochs.entries == []
    assert follower.producers.producers == {}
    assert producer_snapshots.snapshot_offsets(follower.log.directory) == []
    catch_up(follower, leader)
    assert log_bytes(follower.log) == log_bytes(leader.log)
    assert follower.log.leader_epochs.entries == [(1, 6)]
    assert follower.high_watermark == 10
    # The producer's retries are recognised there once it leads (from what it copied).
    elect(rs.values(), 2, 2)
    last = headers_of(follower.log)[-1]
    assert last.producer_id == 6
    retry = batch(2, size=40, pid=6, pepoch=0, seq=last.base_sequence)
    assert follower.append_as_leader(retry, 1, NOW).duplicate


# --- property: replicas converge through leader changes -----------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("fetch"), st.sampled_from(ALL), st.sampled_from((1, 150, BIG))),
        st.tuples(st.just("elect"), st.sampled_from(ALL)),
    ),
    max_size=30,
)

# Elect 2, then 1, with no append in between: replica 2 then follows with an epoch it never
# wrote in.
EMPTY_EPOCH = [
    ("append", 2),
    ("fetch", 2, BIG),
    ("fetch", 3, BIG),
    ("elect", 2),
    ("elect", 1),
    ("append", 1),
]


def run_cluster(ops: list[tuple], leader_writes_first: bool) -> None:
    """Three replicas, all always in the ISR (so any may be elected: each has every record
    below any HW a leader reported, as ISR-only elections guarantee). Leaders append,
    followers fetch from the current leader through the diverging-epoch loop, leadership
    moves with rising epochs. Checks that no record below a reported HW is ever lost and
    that full catch-up leaves every log byte-identical to the leader's."""
    with tempfile.TemporaryDirectory() as tmp:
        rs = replicas(tmp, settings=topic_settings(min_isr=1))
        leader, epoch = 1, 1
        elect(rs.values(), leader, epoch)
        committed = b""  # the longest log prefix below a HW any replica reported

        def note_committed() -> None:
            nonlocal committed
            for p in rs.values():
                below = log_bytes(p.log, p.high_watermark)
                assert below.startswith(committed) or committed.startswith(below)
                committed = max(committed, below, key=len)

        for op in ops:
            if op[0] == "append":
                for _ in range(op[1]):
                    rs[leader].append_as_leader(batch(1 + next(_serial) % 3), 1, NOW)
            elif op[0] == "fetch":
                if op[1] != leader:
                    before = rs[op[1]].high_watermark
                    fetch_once(rs[op[1]], rs[leader], max_bytes=op[2])
                    assert rs[op[1]].log.log_end_offset >= before
            else:
                epoch += 1
                leader = op[1]
                elect(rs.values(), leader, epoch)
                if leader_writes_first:
                    rs[leader].append_as_leader(batch(1), 1, NOW)
            note_committed()

        followers = [p for i, p in rs.items() if i != leader]
        sync_all(rs[leader], followers)
        note_committed()
        expected = log_bytes(rs[leader].log)
        assert expected.startswith(committed)
        for p in followers:
            assert log_bytes(p.log) == expected
            # Epochs that cover records agree; an epoch entry at the very end (a leader
            # that wrote nothing) may linger on an empty follower, as in Kafka, harmlessly.
            end = p.log.log_end_offset
            assert [e for e in p.log.leader_epochs.entries if e[1] < end] == [
                e for e in rs[leader].log.leader_epochs.entries if e[1] < end
            ]
        assert rs[leader].high_watermark == rs[leader].log.log_end_offset
        assert all(p.high_watermark == p.log.log_end_offset for p in followers)


@hypothesis_settings(max_examples=60)
@example(ops=EMPTY_EPOCH + [("fetch", 2, BIG)])
@given(ops=OPS)
def test_replicas_converge_without_losing_committed_records(ops):
    """Every new leader writes a batch at once (so no replica holds an epoch entry with no
    batch behind it: see test_a_replica_elected_without_writing_can_follow_again)."""
    run_cluster(ops, leader_writes_first=True)


@hypothesis_settings(max_examples=60)
@example(ops=EMPTY_EPOCH)
@given(ops=OPS)
def test_replicas_converge_through_elections_without_writes(ops):
    run_cluster(ops, leader_writes_first=False)


def test_a_follower_restarted_inside_a_batch_catches_up(tmp_path):
    """Found by tests/replication_sim (seed 612): DeleteRecords cut the leader's log start
    inside a batch; a follower behind it restarts empty there, and the leader's answer
    starts at the batch's base, below the follower's log end."""
    rs = replicas(tmp_path, (1, 2))
    elect(rs.values(), 1, 1, isr=(1,))
    leader, follower = rs[1], rs[2]
    leader.append_as_leader(batch(3), 1, NOW)
    leader.append_as_leader(batch(2), 1, NOW)
    assert leader.delete_records_before(1) == 1  # inside the first batch (offsets 0-2)
    follower.restart_at(leader.log.log_start_offset)
    catch_up(follower, leader)
    assert follower.log.log_end_offset == leader.log.log_end_offset == 5
    assert follower.log.log_start_offset == 1
    assert log_bytes(follower.log) == log_bytes(leader.log)


def test_a_stale_follower_ending_inside_the_leaders_batch_catches_up(tmp_path):
    """Found by tests/replication_sim (seed 11305): a follower holding an older leader's
    never-committed records ends exactly at a log start that DeleteRecords cut inside the new
    leader's batch. The epoch check sees no divergence (the leader's epoch entry now starts
    at its log start) and the answer starts below the follower's log end; the follower must
    drop its own records there rather than refuse the batch on every fetch."""
    rs = replicas(tmp_path, (1, 2))
    old_leader, new_leader = rs[2], rs[1]
    elect(rs.values(), 2, 1, isr=(2,))
    old_leader.append_as_leader(batch(2), 1, NOW)  # offsets 0-1, never replicated
    elect([new_leader], 1, 2, isr=(1,), replicas=(1, 2))  # broker 2 is down meanwhile
    new_leader.append_as_leader(batch(4), 2, NOW)  # offsets 0-3
    assert new_leader.delete_records_before(2) == 2  # inside that batch
    elect(rs.values(), 1, 2, isr=(1,))
    catch_up(rs[2], new_leader)
    assert rs[2].log.log_end_offset == new_leader.log.log_end_offset == 4
    assert rs[2].log.log_start_offset == 2
    assert log_bytes(rs[2].log) == log_bytes(new_leader.log)
