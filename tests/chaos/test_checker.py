"""The chaos checker on made-up histories: each kind of violation is found, and a clean
history has none (so a clean chaos run means something)."""

from __future__ import annotations

from tests.chaos.checker import check
from tests.chaos.nemesis import Fault
from tests.chaos.workload import Ack, Recorder


def history() -> tuple[Recorder, list[tuple[int, int, bytes]]]:
    rec = Recorder()
    final = []
    for seq in range(6):
        value = b"0:%d" % seq
        rec.acks.append(Ack(value, seq % 2, seq // 2, sent=10.0 + seq, acked=10.5 + seq))
        final.append((seq % 2, seq // 2, value))
    rec.reads = [(11.0, "chaos", 0, 0, b"0:0")]
    rec.commits = [(11.0, "chaos", 0, 1, "r0"), (12.0, "chaos", 0, 2, "r1")]
    rec.controller_rounds = [(11.0, {1: (1.0, 4.0), 2: (0.0, 4.0)})]
    return rec, final


def replicas_of(final):
    views = {}
    for partition, offset, value in final:
        for broker in (1, 2, 3):
            views.setdefault(partition, {}).setdefault(broker, {})[offset] = value
    return views


def test_a_clean_history_has_no_violation_and_unavailability_is_measured():
    rec, final = history()
    report = check(rec, final, [Fault(11.2, "kill", 1)], replicas_of(final))
    assert report.violations == 0, report.summary()
    # The worst partition: 1's first record sent after the fault left at 13.0, acked 13.5.
    assert [round(x, 2) for x in report.unavailable["kill"]] == [2.3]


def test_every_kind_of_violation_is_found():
    rec, final = history()
    del final[3]  # 0:3 (partition 1 offset 1) acknowledged, never read: lost
    final.append((1, 5, b"0:0"))  # 0:0 at a second offset: duplicated
    final[0], final[2] = (0, 0, b"0:2"), (0, 1, b"0:0")  # 0:0 after 0:2 in partition 0
    rec.reads.append((12.0, "chaos", 1, 9, b"0:9"))  # a read the end lacks: vanished
    rec.commits.append((13.0, "chaos", 0, 1, "r0"))  # 2 then 1: backwards
    rec.controller_rounds.append((12.0, {1: (1.0, 5.0), 2: (1.0, 5.0)}))  # two, one epoch
    replicas = replicas_of(final)
    replicas[0][3][0] = b"other"  # broker 3 disagrees at partition 0 offset 0
    del replicas[1][2][5]  # broker 2 never caught up on partition 1
    report = check(rec, final, [], replicas)
    assert report.lost == [b"0:3"]
    assert report.duplicated == [b"0:0"]
    # 0:0 comes after 0:2 in partition 0, and its duplicate after 0:5 in partition 1
    assert report.reordered == ["producer 0 in partition 0", "producer 0 in partition 1"]
    assert any("0@0" in line and "broker 3" in line for line in report.inconsistent)
    # 1@9 was never in the log; 0@0 now holds another value than the group read there.
    assert sorted(v.split(":")[0] for v in report.vanished) == ["0@0", "1@9"]
    assert len(report.commits_backwards) == 1
    assert len(report.two_controllers) == 1
    assert len(report.replicas_behind) == 1 and "broker 2" in report.replicas_behind[0]


def test_an_acknowledgement_without_an_offset_needs_the_value_in_its_partition():
    """strom/sender.py acknowledges a batch known written by a later one with offset -1."""
    rec, final = history()
    rec.acks[0] = Ack(b"0:0", 0, -1, sent=10.0, acked=10.5)
    assert check(rec, final, [], replicas_of(final)).violations == 0
    rec.acks[0] = Ack(b"0:0", 1, -1, sent=10.0, acked=10.5)  # read in partition 0, not 1
    report = check(rec, final, [], replicas_of(final))
    assert len(report.inconsistent) == 1 and "0:0" in report.inconsistent[0]
