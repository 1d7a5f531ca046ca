"""The checker: what a run's records say about the cluster, in the spirit of Jepsen's queue
checker. Every count is of something Strom promises never happens with acks=all,
min.insync.replicas=2, RF 3 and idempotent producers, except the availability figures.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from tests.chaos.nemesis import Fault
from tests.chaos.workload import Ack, Recorder


@dataclass
class Report:
    acknowledged: int = 0
    read: int = 0
    group_reads: int = 0  # records the group's members read while the faults ran
    group_commits: int = 0  # offsets they committed
    lost: list[bytes] = field(default_factory=list)  # acknowledged, never read
    duplicated: list[bytes] = field(default_factory=list)  # one value at two offsets
    inconsistent: list[str] = field(default_factory=list)  # one offset, two values
    reordered: list[str] = field(default_factory=list)  # a producer's records out of order
    vanished: list[str] = field(default_factory=list)  # a group read that the end lacks
    commits_backwards: list[str] = field(default_factory=list)
    two_controllers: list[str] = field(default_factory=list)  # two active in one epoch
    replicas_behind: list[str] = field(default_factory=list)  # not caught up after healing
    # A login or a granted request refused (secured runs: the users hold what they need).
    refused: list[str] = field(default_factory=list)
    unavailable: dict[str, list[float]] = field(default_factory=dict)  # per fault kind, s
    failed_sends: int = 0
    topics_created: int = 0
    reassignments: int = 0

    @property
    def violations(self) -> int:
        return sum(
            len(x)
            for x in (
                self.lost,
                self.duplicated,
                self.inconsistent,
                self.reordered,
                self.vanished,
                self.commits_backwards,
                self.two_controllers,
                self.replicas_behind,
                self.refused,
            )
        )

    def summary(self) -> str:
        lines = [
            f"acknowledged {self.acknowledged}, read at the end {self.read}, failed sends "
            f"{self.failed_sends} (not acknowledged: allowed); the group read "
            f"{self.group_reads} and committed {self.group_commits} offsets; during the faults "
            f"{self.topics_created} topics created and written, {self.reassignments} "
            f"partitions reassigned with a preferred election",
            f"lost {len(self.lost)}, duplicated {len(self.duplicated)}, inconsistent offsets "
            f"{len(self.inconsistent)}, reordered {len(self.reordered)}, vanished reads "
            f"{len(self.vanished)}, committed offsets backwards {len(self.commits_backwards)}, "
            f"two active controllers {len(self.two_controllers)}, replicas behind after "
            f"healing {len(self.replicas_behind)}, refused logins or requests "
            f"{len(self.refused)}",
        ]
        for kind, gaps in sorted(self.unavailable.items()):
            lines.append(
                f"unavailability after {kind}: median {statistics.median(gaps):.2f} s, max "
                f"{max(gaps):.2f} s over {len(gaps)} fault(s)"
            )
        for name in (
            "lost",
            "duplicated",
            "inconsistent",
            "reordered",
            "vanished",
            "commits_backwards",
            "two_controllers",
            "replicas_behind",
            "refused",
        ):
            items = getattr(self, name)
            if items:
                lines.append(f"  {name}: {items[:5]!r}{' ...' if len(items) > 5 else ''}")
        return "\n".join(lines)


def check(
    rec: Recorder,
    final: list[tuple[int, int, bytes]],
    faults: list[Fault],
    replicas: dict[int, dict[int, dict[int, bytes]]] | None = None,
    churn: dict[str, list[tuple[int, int, bytes]]] | None = None,
) -> Report:
    report = Report(
        acknowledged=len(rec.acks) + len(rec.churn_acks),
        read=len(final),
        group_reads=len(rec.reads),
        group_commits=len(rec.commits),
        failed_sends=rec.failed_sends,
        topics_created=rec.topics_created,
        reassignments=rec.reassignments,
        refused=list(rec.refused),
    )
    _check_churn(report, rec, churn or {})
    at_offset: dict[tuple[int, int], bytes] = {}
    offsets_of: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, offset, value in final:
        if (partition, offset) in at_offset and at_offset[(partition, offset)] != value:
            report.inconsistent.append(f"final read: {partition}@{offset} twice, two values")
        at_offset[(partition, offset)] = value
        offsets_of[value].append((partition, offset))
    report.duplicated = sorted(v for v, where in offsets_of.items() if len(where) > 1)
    for ack in rec.acks:
        where = offsets_of.get(ack.value)
        if not where:
            report.lost.append(ack.value)
        elif not _read_where_acked(ack, where):
            report.inconsistent.append(
                f"{ack.value!r} acknowledged at {ack.partition}@{ack.offset}, read at {where}"
            )
    # Per producer and partition, values in offset order must be in send order.
    by_producer: dict[tuple[bytes, int], list[tuple[int, int]]] = defaultdict(list)
    for partition, offset, value in final:
        producer, _, seq = value.partition(b":")
        by_producer[(producer, partition)].append((offset, int(seq)))
    for (producer, partition), seen in by_producer.items():
        seqs = [seq for _, seq in sorted(seen)]
        if any(b <= a for a, b in zip(seqs, seqs[1:], strict=False)):
            report.reordered.append(f"producer {producer.decode()} in partition {partition}")
    for _, _, partition, offset, value in rec.reads:
        if at_offset.get((partition, offset)) != value:
            report.vanished.append(
                f"{partition}@{offset}: group read {value!r}, final "
                f"{at_offset.get((partition, offset))!r}"
            )
    last: dict[tuple[str, int], tuple[int, str]] = {}
    for _, topic, partition, offset, member in sorted(rec.commits):
        key = (topic, partition)
        if key in last and offset < last[key][0]:
            report.commits_backwards.append(
                f"{topic}-{partition}: {last[key][0]} ({last[key][1]}) then {offset} ({member})"
            )
        last[key] = (offset, member)
    for when, seen in rec.controller_rounds:
        active_epochs = [epoch for active, epoch in seen.values() if active >= 1]
        if len(active_epochs) != len(set(active_epochs)):
            report.two_controllers.append(f"t={when:.1f}: {seen}")
    _compare_replicas(report, at_offset, replicas or {})
    report.unavailable = unavailability(rec, faults)
    return report


def _read_where_acked(ack: Ack, where: list[tuple[int, int]]) -> bool:
    """The acknowledgement's partition and offset are among those the value was read at. An
    offset of -1: the producer learnt the record was written, not where (strom/sender.py:
    a later batch was acknowledged), so its partition alone must match."""
    if ack.offset < 0:
        return any(partition == ack.partition for partition, _ in where)
    return (ack.partition, ack.offset) in where


def _check_churn(
    report: Report, rec: Recorder, churn: dict[str, list[tuple[int, int, bytes]]]
) -> None:
    """Records acknowledged in topics created during the faults are all there, once."""
    for topic, records in churn.items():
        where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
        for partition, offset, value in records:
            where[value].append((partition, offset))
        report.duplicated += sorted(v for v, w in where.items() if len(w) > 1)
        for acked_topic, ack in rec.churn_acks:
            if acked_topic != topic:
                continue
            if not where.get(ack.value):
                report.lost.append(ack.value)
            elif not _read_where_acked(ack, where[ack.value]):
                report.inconsistent.append(
                    f"{ack.value!r} acknowledged at {topic} {ack.partition}@{ack.offset}, "
                    f"read at {where[ack.value]}"
                )
    read_topics = set(churn)
    report.lost += [ack.value for topic, ack in rec.churn_acks if topic not in read_topics]


def _compare_replicas(
    report: Report,
    at_offset: dict[tuple[int, int], bytes],
    replicas: dict[int, dict[int, dict[int, bytes]]],
) -> None:
    """Every replica, read on its own, must hold what the final read saw at each offset, and
    all of it once healed."""
    for partition, views in sorted(replicas.items()):
        end = max((o + 1 for p, o in at_offset if p == partition), default=0)
        for broker, view in sorted(views.items()):
            for offset, value in view.items():
                expected = at_offset.get((partition, offset))
                if expected is not None and expected != value:
                    report.inconsistent.append(
                        f"replica on broker {broker}: {partition}@{offset} is {value!r}, the "
                        f"final read {expected!r}"
                    )
            held = max(view, default=-1) + 1
            if held < end:
                report.replicas_behind.append(
                    f"partition {partition} on broker {broker}: up to {held}, the log ends at {end}"
                )


def unavailability(rec: Recorder, faults: list[Fault]) -> dict[str, list[float]]:
    """Per fault: over partitions, the longest wait from the fault until a record sent after
    it was acknowledged (what a producer of that partition saw)."""
    by_partition: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for ack in rec.acks:
        by_partition[ack.partition].append((ack.sent, ack.acked))
    out: dict[str, list[float]] = defaultdict(list)
    for fault in faults:
        worst = 0.0
        for acks in by_partition.values():
            after = [acked for sent, acked in acks if sent >= fault.at]
            if after:
                worst = max(worst, min(after) - fault.at)
        out[fault.kind].append(worst)
    return dict(out)
