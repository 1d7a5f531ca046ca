"""The streaming read: offsets as `{topic: {partition: offset}}` (Spark's Kafka source JSON),
`maxOffsetsPerTrigger` through Spark's read limits, Trigger.AvailableNow through a target
fixed when the query starts.

Each micro-batch lists the partitions again, so partitions added to a subscribed topic (and
topics newly matching `subscribePattern`) are read from their earliest offset, logged as
Spark's Kafka source logs them; one that no longer starts at offset 0 lost records before
the query saw it, which fails the query unless failOnDataLoss=false (as in Spark).

Spark keeps one stream reader per query in a long-lived Python process beside the driver;
each call opens a SyncCluster and closes it before returning, so the reader holds only
plain values (and the AvailableNow target) between calls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pyspark_strom.options import Options, client_tls_of
from pyspark_strom.planning import (
    OffsetRange,
    data_loss,
    offsets_of,
    resolve,
    split,
    topic_partitions,
)
from pyspark_strom.reading import TaskSettings, read_offset_range
from strom.errors import StromError
from strom.range_reader import EARLIEST, LATEST, SyncCluster, TopicPartition
from strom_api.error_codes import ErrorCode

Offsets = dict[TopicPartition, int]

log = logging.getLogger("pyspark_strom")


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(offsets: dict[str, Any]) -> Offsets:
    return {
        TopicPartition(topic, int(p)): int(o)
        for topic, parts in offsets.items()
        for p, o in parts.items()
    }


def rate_limit(begin: Offsets, latest: Offsets, limit: int) -> Offsets:
    """Ends that take at most `limit` records in all, shared across the partitions in
    proportion to their backlog (largest remainders get the odd records)."""
    backlog = {tp: max(latest[tp] - begin[tp], 0) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * size / total for tp, size in backlog.items()}
    take = {tp: int(share) for tp, share in shares.items()}
    left = limit - sum(take.values())
    for tp in sorted(shares, key=lambda t: (take[t] - shares[t], t))[:left]:
        take[tp] += 1
    return {tp: begin[tp] + take[tp] for tp in latest}


def added_partition_loss(tp: TopicPartition, first: int) -> StromError:
    return StromError(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        f"added partition {tp.topic}-{tp.partition} starts from offset {first} instead of 0: "
        "some data may have been missed. Set failOnDataLoss=false to read it from there",
    )


class StromStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.settings = TaskSettings(
            opts.bootstrap,
            opts.request_timeout_ms,
            opts.include_headers,
            opts.fail_on_data_loss,
            opts.fetch_bytes,
            opts.security,
        )
        self.target: Offsets | None = None  # Trigger.AvailableNow: read no further

    def _cluster(self) -> SyncCluster:
        return SyncCluster(
            self.opts.bootstrap, self.opts.request_timeout_ms, tls=client_tls_of(self.opts.security)
        )

    def initialOffset(self) -> dict[str, Any]:
        with self._cluster() as cluster:
            tps = topic_partitions(cluster, self.opts)
            spec = self.opts.starting
            option = {"timestamp": "startingTimestamp", "timestamps": "startingOffsetsByTimestamp"}
            start = resolve(
                cluster,
                tps,
                spec,
                option.get(spec.kind, "startingOffsets"),
                self.opts.by_timestamp_strategy,
            )
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with self._cluster() as cluster:
            tps = topic_partitions(cluster, self.opts)
            self.target = offsets_of(cluster, tps, LATEST)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        with self._cluster() as cluster:
            tps = topic_partitions(cluster, self.opts)
            if self.target is not None:
                tps = [tp for tp in tps if tp in self.target]
            latest = offsets_of(cluster, tps, LATEST)
            earliest = offsets_of(cluster, tps, EARLIEST)
        for tp in tps:
            if tp not in begin:
                begin[tp] = earliest[tp]  # a new partition: from its start
            elif begin[tp] < earliest[tp] and not self.opts.fail_on_data_loss:
                begin[tp] = earliest[tp]  # deleted records are skipped, not counted as backlog
        if self.target is not None:
            latest = {tp: min(o, self.target[tp]) for tp, o in latest.items()}
        latest = {tp: max(o, begin[tp]) for tp, o in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit({tp: begin[tp] for tp in latest}, latest, limit.max_rows)
        # Partitions no longer listed keep their offsets, so that `partitions` can tell.
        ends = {tp: o for tp, o in from_json(start).items() if tp not in latest}
        ends.update(latest)
        return to_json(ends)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = from_json(start), from_json(end)
        moved = [tp for tp, o in finish.items() if tp not in begin or o > begin[tp]]
        with self._cluster() as cluster:
            earliest = offsets_of(cluster, moved, EARLIEST)
        self._check_added({tp: earliest[tp] for tp in moved if tp not in begin})
        ranges = []
        for tp in moved:
            first, last = begin.get(tp, earliest[tp]), finish[tp]
            if first < earliest[tp]:
                if self.opts.fail_on_data_loss:
                    raise data_loss(tp, first, earliest[tp])
                first = earliest[tp]
            if last > first:
                ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        return split(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)

    def _check_added(self, added: Offsets) -> None:
        """New partitions start at their earliest offset; one that is not 0 had records
        deleted before this query read it (Spark: "Added partition ... starts from ...")."""
        if not added:
            return
        log.info("Partitions added: %s", to_json(added))
        for tp, first in sorted(added.items()):
            if first == 0:
                continue
            if self.opts.fail_on_data_loss:
                raise added_partition_loss(tp, first)
            log.warning("%s", added_partition_loss(tp, first))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark reads one empty partition when planning gave none
        return read_offset_range(self.settings, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # Strom keeps no consumer offsets for Spark: the checkpoint holds them

    def stop(self) -> None:
        pass
