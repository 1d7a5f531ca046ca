"""From options to offset ranges: which partitions a query reads, where each starts and ends,
and how the ranges are cut into Spark input partitions (Spark's KafkaOffsetRangeCalculator).

Runs where Spark plans (a Python worker beside the driver), against a SyncCluster that the
caller opens and closes: nothing here outlives the call.
"""

from __future__ import annotations

import itertools
import re

from pyspark.sql.datasource import InputPartition

from pyspark_strom.options import OffsetSpec, Options, invalid
from strom.errors import StromError
from strom.range_reader import EARLIEST, LATEST, SyncCluster, TopicPartition
from strom_api.error_codes import ErrorCode


class OffsetRange(InputPartition):
    """One Spark input partition: offsets [start, end) of one topic-partition. Plain values
    only, so it pickles to the task that reads it."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.end}))"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def topic_partitions(cluster: SyncCluster, opts: Options) -> list[TopicPartition]:
    """The partitions that `subscribe`, `subscribePattern` or `assign` name; an unknown topic
    or partition is UNKNOWN_TOPIC_OR_PARTITION (a pattern matching nothing reads nothing)."""
    if opts.subscribe:
        return [TopicPartition(t, p) for t in opts.subscribe for p in cluster.partitions(t)]
    if opts.pattern is not None:
        regex = re.compile(opts.pattern)
        names = [t for t in cluster.all_topics() if regex.fullmatch(t)]
        return [TopicPartition(t, p) for t in names for p in cluster.partitions(t)]
    for tp in opts.assign:
        if tp.partition not in cluster.partitions(tp.topic):
            raise StromError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {tp.partition} of topic '{tp.topic}' does not exist (option 'assign')",
            )
    return list(dict.fromkeys(opts.assign))


def offsets_of(
    cluster: SyncCluster, tps: list[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """EARLIEST / LATEST offsets of the partitions."""
    if not tps:
        return {}
    found = cluster.list_offsets(dict.fromkeys(tps, timestamp))
    return {tp: offset for tp, (offset, _) in found.items()}


def resolve(
    cluster: SyncCluster,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    option: str,
    strategy: str = "error",
    earliest: dict[TopicPartition, int] | None = None,
    latest: dict[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """The offset `spec` names for each partition."""
    earliest = earliest if earliest is not None else offsets_of(cluster, tps, EARLIEST)
    latest = latest if latest is not None else offsets_of(cluster, tps, LATEST)
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind in ("offsets", "timestamps"):
        missing = sorted(set(tps) - set(spec.offsets))
        extra = sorted(set(spec.offsets) - set(tps))
        if missing or extra:
            named = ", ".join(f"{t}-{p}" for t, p in (missing or extra))
            raise invalid(
                f"option '{option}' must give exactly the partitions read: "
                f"{'missing' if missing else 'not read'} {named}"
            )
    if spec.kind == "offsets":
        special = {EARLIEST: earliest, LATEST: latest}
        return {
            tp: special[spec.offsets[tp]][tp] if spec.offsets[tp] < 0 else spec.offsets[tp]
            for tp in tps
        }
    stamps = (
        dict.fromkeys(tps, spec.timestamp)
        if spec.kind == "timestamp"
        else {tp: spec.offsets[tp] for tp in tps}
    )
    found = cluster.list_offsets(stamps) if stamps else {}
    out = {}
    for tp in tps:
        offset = found[tp][0]
        if offset < 0:  # no record that recent
            if option.startswith("starting") and strategy == "error":
                raise StromError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"{tp.topic}-{tp.partition} has no record at or after timestamp "
                    f"{stamps[tp]} (option '{option}'); set "
                    f"startingOffsetsByTimestampStrategy=latest to start at the end instead",
                )
            offset = latest[tp]
        out[tp] = offset
    return out


def data_loss(tp: TopicPartition, offset: int, log_start: int) -> StromError:
    return StromError(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        f"{tp.topic}-{tp.partition}: offsets {offset}..{log_start - 1} are no longer in the log "
        f"(log start {log_start}); some data may have been lost. Set failOnDataLoss=false to "
        "read from the log start instead",
    )


def batch_ranges(cluster: SyncCluster, opts: Options) -> list[OffsetRange]:
    """The offset ranges of a batch query, before splitting."""
    tps = topic_partitions(cluster, opts)
    earliest = offsets_of(cluster, tps, EARLIEST)
    latest = offsets_of(cluster, tps, LATEST)
    start = resolve(
        cluster,
        tps,
        opts.starting,
        _name(opts.starting, "starting"),
        opts.by_timestamp_strategy,
        earliest,
        latest,
    )
    end = resolve(
        cluster, tps, opts.ending, _name(opts.ending, "ending"), "latest", earliest, latest
    )
    ranges = []
    for tp in tps:
        first, last = start[tp], end[tp]
        if first < earliest[tp]:
            if opts.fail_on_data_loss:
                raise data_loss(tp, first, earliest[tp])
            first = earliest[tp]
        if last > latest[tp]:
            raise StromError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{tp.topic}-{tp.partition}: endingOffsets {last} is past the end of the log "
                f"({latest[tp]})",
            )
        if first > last:
            raise StromError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{tp.topic}-{tp.partition}: the starting offset {first} is after the ending "
                f"offset {last}",
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    return ranges


def _name(spec: OffsetSpec, side: str) -> str:
    return {
        "timestamp": f"{side}Timestamp",
        "timestamps": f"{side}OffsetsByTimestamp",
    }.get(spec.kind, f"{side}Offsets")


def split(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Drops empty ranges; cuts ranges longer than `max_records`; then, when there are fewer
    ranges than `min_partitions`, cuts each into parts in proportion to its share of all the
    records (at least one part each), as Spark's Kafka source does."""
    out = [r for r in ranges if r.size > 0]
    if max_records:
        out = [part for r in out for part in _cut(r, -(-r.size // max_records))]
    if min_partitions and len(out) < min_partitions:
        total = sum(r.size for r in out)
        out = [
            part for r in out for part in _cut(r, max(round(r.size / total * min_partitions), 1))
        ]
    return sorted(out, key=lambda r: (r.topic, r.partition, r.start))


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(min(parts, r.size), 1)
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds) if b > a]
