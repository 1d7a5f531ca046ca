"""Building one partition's change: a new ISR, replica set or leader, as a PartitionChangeRecord
(after Kafka's PartitionChangeBuilder).

The controller says what it wants (a target ISR, target replicas, which brokers may lead,
what kind of election) and gets back the record that gets there, or None when nothing
changes. Leader election, as in Kafka:
- ONLINE (the default): keep the leader while it is in the ISR and may lead; else the first
  replica, in replica order, that is in the ISR and may lead; else the first eligible
  leader replica (ELR, below) that may lead, which becomes the whole ISR; else, if unclean
  election is enabled (`unclean.leader.election.enable`), the first replica that may lead
  at all, which becomes the whole ISR and leads in RECOVERING state; else no leader.
- PREFERRED: the first replica if it is in the ISR and may lead (else as ONLINE).
- UNCLEAN: as ONLINE with unclean election enabled.
Eligible leader replicas (KIP-966): the high watermark does not move while the ISR is below
min.insync.replicas (broker/partition_leader.py), so a replica that leaves the ISR when it
falls (or stays) below that size holds every committed record and may lead cleanly later.
Those replicas join the ELR; the ELR empties once the ISR is back at min.insync.replicas
(the high watermark moves again, past what they hold); a replica back in the ISR, out of
the replica set, or restarted after an unclean shutdown (it lost unflushed records) leaves
it. This is what keeps a replica that lost its tail from leading over one that did not.
The replay side (PartitionRegistration.merge) bumps the partition epoch for every change
and the leader epoch when the record names a leader.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metadata.image import PartitionRegistration
from metadata.records import NO_LEADER
from strom_api.v1 import metadata_pb2 as pb


class Election(enum.Enum):
    ONLINE = "online"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class LeaderChoice:
    leader: int
    unclean: bool  # chosen from outside the ISR and ELR: the ISR becomes just this replica
    from_elr: bool = False  # an eligible leader replica: the ISR becomes just this replica


def elect_leader(
    replicas: Sequence[int],
    isr: Sequence[int],
    current: int,
    acceptable: Callable[[int], bool],
    election: Election = Election.ONLINE,
    unclean_enabled: bool = False,
    elr: Sequence[int] = (),
) -> LeaderChoice:
    in_isr = set(isr)
    if election is Election.PREFERRED and replicas:
        preferred = replicas[0]
        if preferred in in_isr and acceptable(preferred):
            return LeaderChoice(preferred, unclean=False)
    if current != NO_LEADER and current in in_isr and acceptable(current):
        return LeaderChoice(current, unclean=False)
    for replica in replicas:
        if replica in in_isr and acceptable(replica):
            return LeaderChoice(replica, unclean=False)
    for replica in replicas:
        if replica in elr and acceptable(replica):
            return LeaderChoice(replica, unclean=False, from_elr=True)
    if unclean_enabled or election is Election.UNCLEAN:
        for replica in replicas:
            if acceptable(replica):
                return LeaderChoice(replica, unclean=True)
    return LeaderChoice(NO_LEADER, unclean=False)


def isr_without(isr: Sequence[int], broker: int) -> tuple[int, ...]:
    """The ISR after `broker` leaves it (fenced, shutting down), keeping the last member:
    it holds every committed record, and may lead again when it returns (Kafka before
    KIP-966 kept it too; Kafka 4 moves it to the ELR, which here holds the members that
    left before it). Only a restart that lost data takes it out (broker_lifecycle)."""
    remaining = tuple(b for b in isr if b != broker)
    return remaining if remaining else tuple(isr)


def next_elr(
    replicas: Sequence[int],
    old_isr: Sequence[int],
    new_isr: Sequence[int],
    old_elr: Sequence[int],
    min_isr: int,
    lost_data: Sequence[int] = (),
) -> tuple[int, ...]:
    """The ELR after the ISR goes from `old_isr` to `new_isr`: empty once the ISR reaches
    `min_isr`; else the old ELR plus those leaving the ISR, less ISR members, non-replicas
    and `lost_data` (brokers back from an unclean shutdown)."""
    if len(new_isr) >= min_isr:
        return ()
    candidates = (*old_elr, *(b for b in old_isr if b not in new_isr))
    return tuple(
        dict.fromkeys(
            b for b in candidates if b not in new_isr and b in replicas and b not in lost_data
        )
    )


def build_partition_change(
    topic_id: bytes,
    partition_id: int,
    current: PartitionRegistration,
    acceptable: Callable[[int], bool],
    *,
    target_isr: Sequence[int] | None = None,
    target_replicas: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
    unclean_enabled: bool = False,
    min_isr: int = 1,
    lost_data: Sequence[int] = (),
) -> pb.PartitionChangeRecord | None:
    """`min_isr`: the topic's min.insync.replicas, for the ELR; `lost_data`: brokers back
    from an unclean shutdown, which may not stay in the ELR."""
    replicas = tuple(current.replicas if target_replicas is None else target_replicas)
    isr = tuple(current.isr if target_isr is None else target_isr)
    removing = tuple(current.removing_replicas if target_removing is None else target_removing)
    adding = tuple(current.adding_replicas if target_adding is None else target_adding)
    isr = tuple(b for b in isr if b in replicas) or isr  # never outside the replica set
    elr = next_elr(replicas, current.isr, isr, current.elr, min_isr, lost_data)
    choice = elect_leader(replicas, isr, current.leader, acceptable, election, unclean_enabled, elr)
    record = pb.PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    if choice.from_elr:
        isr = (choice.leader,)
        elr = next_elr(replicas, current.isr, isr, current.elr, min_isr, lost_data)
    if choice.unclean:
        # The new leader's log is the truth now: whatever the ELR held beyond it is gone.
        isr, elr = (choice.leader,), ()
        record.leader_recovery_state = pb.RECOVERING
    if choice.leader != current.leader:
        record.leader = choice.leader
    if isr != current.isr:
        record.isr.SetInParent()
        record.isr.ids.extend(isr)
    if elr != current.elr:
        record.eligible_leader_replicas.SetInParent()
        record.eligible_leader_replicas.ids.extend(elr)
    if replicas != current.replicas:
        record.replicas.SetInParent()
        record.replicas.ids.extend(replicas)
    if removing != current.removing_replicas:
        record.removing_replicas.SetInParent()
        record.removing_replicas.ids.extend(removing)
    if adding != current.adding_replicas:
        record.adding_replicas.SetInParent()
        record.adding_replicas.ids.extend(adding)
    changed = [f.name for f, _ in record.ListFields()]
    return record if set(changed) - {"partition_id", "topic_id"} else None
