"""Partition reassignment (KIP-455) as the active controller runs it in KRaft (after Kafka's
ReplicationControlManager, PartitionReassignmentReplicas and PartitionReassignmentRevert).

A reassignment moves a partition to a target replica list in stages, so the partition is
never left without in-sync copies:
1. one PartitionChangeRecord makes the replicas target + the replicas being removed, with
   adding_replicas (target - current) and removing_replicas (current - target); the ISR and
   the leader stay as they are, and the brokers being added start fetching;
2. the leader adds them to the ISR as they catch up (AlterPartition);
3. once they are all in it, another record finishes: replicas = target, ISR trimmed to the
   target, adding and removing cleared, and a new leader from the target (in target order)
   if the old one was being removed.
A reassignment that adds nothing (a reorder, or dropping replicas whose remaining ISR is
enough) goes straight to stage 3 in its first record, as Kafka's PartitionChangeBuilder
completes whatever it can on every change. Cancelling puts the replicas back as they were
before (the replicas minus the ones being added).

Operations take the image and return records, changing nothing themselves; the controller's
AlterPartition (alter_partition.alter_partition_completing_reassignments) appends the records
of complete_reassignments in the same batch as the ISR change that allows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from google.protobuf.message import Message

from metadata.broker_lifecycle import may_lead, min_insync_replicas, unclean_election_enabled
from metadata.config_control import NO_LOCAL_CONFIG, LocalConfig
from metadata.errors import ApiError
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.partition_change import build_partition_change
from strom_api.error_codes import ErrorCode

TopicPartition = tuple[str, int]


class OngoingReassignment(NamedTuple):
    """A partition being reassigned, as ListPartitionReassignments reports it."""

    replicas: tuple[int, ...]  # everything it has now: the target, then those being removed
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def in_progress(partition: PartitionRegistration) -> bool:
    return bool(partition.adding_replicas or partition.removing_replicas)


def _find(
    image: MetadataImage, name: str, partition_id: int
) -> tuple[TopicImage, PartitionRegistration]:
    topic = image.topics.by_name.get(name)
    if topic is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
        )
    partition = topic.partitions.get(partition_id)
    if partition is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{partition_id}."
        )
    return topic, partition


def _validate_target(image: MetadataImage, target: Sequence[int]) -> None:
    """Kafka's validateManualPartitionAssignment: not empty, every broker registered (fenced
    ones too: a reassignment may wait for a broker that is down), none twice."""
    if not target:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(target):
        if broker_id not in image.cluster.brokers:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id


def _completed(
    replicas: Sequence[int],
    isr: Sequence[int],
    adding: Sequence[int],
    removing: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The replicas and ISR a reassignment finishes with, or None while it must wait
    (Kafka's PartitionReassignmentReplicas.maybeCompleteReassignment, as of KAFKA-19975):
    - some ISR member must remain once the removed replicas leave it;
    - every replica being added must be in the ISR (a new broker may be unhealthy);
    - when the replica count shrinks, every target replica must be in the ISR, or finishing
      would shrink the ISR needlessly ([0,1,2,3,4] -> [2,3,4,5] with ISR [0,1,5] would
      leave ISR [5]).
    A target replica that was already a replica and lags (neither added nor removed) does
    not hold up a reassignment that keeps or grows the replica count."""
    if not adding and not removing:
        return None
    gone = set(removing)
    new_replicas = tuple(b for b in replicas if b not in gone)
    new_isr = tuple(b for b in isr if b not in gone)
    if not new_isr or not new_replicas:
        return None
    in_isr = set(new_isr)
    if any(b not in in_isr for b in adding):
        return None
    if len(adding) < len(removing) and any(b not in in_isr for b in new_replicas):
        return None
    return new_replicas, new_isr


def _change(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    current: PartitionRegistration,
    replicas: Sequence[int],
    adding: Sequence[int],
    removing: Sequence[int],
    *,
    unclean: bool,
    local: LocalConfig,
) -> Message | None:
    """The record taking `current` to the given reassignment state, finishing it at once
    when it can; the leader is re-elected (from the new replicas, in order) only when it
    leaves the ISR or may not lead, and from outside the ISR only if `unclean`."""
    isr: Sequence[int] = current.isr
    done = _completed(replicas, isr, adding, removing)
    if done is not None:
        (replicas, isr), adding, removing = done, (), ()
    return build_partition_change(
        topic.topic_id,
        partition_id,
        current,
        may_lead(image),
        target_replicas=replicas,
        target_isr=isr,
        target_adding=adding,
        target_removing=removing,
        unclean_enabled=unclean,
        min_isr=min_insync_replicas(image, topic.name, local),
    )


def _start(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    current: PartitionRegistration,
    target: Sequence[int],
    local: LocalConfig,
) -> Message | None:
    """Kafka's changePartitionReassignment: adding = target - current, removing = current -
    target, replicas = target then removing.

    Replacing a reassignment in progress: Kafka's KRaft controller takes "current" as all
    the partition's replicas, so a broker the old reassignment was still adding counts as
    settled (a new target naming it would not wait for it to catch up; one dropping it
    keeps it as a replica until completion, and a cancel then keeps it for good). Here
    "current" leaves out the brokers being added that are not yet in the ISR: one the new
    target names stays being added, one it does not leaves the replicas at once (it is in
    no ISR and leads nothing, so nothing else moves), as Kafka's ZooKeeper controller
    dropped them. Those already in the ISR count as settled, as in KRaft. A cancel after a
    replacement therefore goes back to the replicas that were there or had caught up."""
    _validate_target(image, target)
    in_isr = set(current.isr)
    catching_up = {b for b in current.adding_replicas if b not in in_isr}
    settled = tuple(b for b in current.replicas if b not in catching_up)
    in_target = set(target)
    in_settled = set(settled)
    # Kafka keeps adding and removing as sorted sets; the lists' own orders are kept here
    # instead, so the record reads as the operator wrote the target, and a cancel restores
    # the old order of the replicas being removed (the preferred leader among them).
    removing = tuple(b for b in settled if b not in in_target)
    adding = tuple(b for b in target if b not in in_settled)
    replicas = (*target, *removing)
    return _change(
        image, topic, partition_id, current, replicas, adding, removing, unclean=False, local=local
    )


def _cancel(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    current: PartitionRegistration,
    local: LocalConfig,
) -> Message | None:
    """Kafka's cancelPartitionReassignment: back to the replicas minus those being added,
    the ISR likewise; a new leader if the leader was one being added."""
    if not in_progress(current):
        raise ApiError(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
            "No partition reassignment is in progress.",
        )
    adding = set(current.adding_replicas)
    replicas = tuple(b for b in current.replicas if b not in adding)
    isr = tuple(b for b in current.isr if b not in adding)
    acceptable = may_lead(image)
    unclean = unclean_election_enabled(image, topic.name, local)
    if not isr:
        # Every ISR member was one being added: going back needs a leader from outside the
        # ISR. Kafka refuses unless unclean election is enabled for the topic. When it is,
        # Kafka puts the first original replica in the ISR and elects "cleanly" from it;
        # here the election is unclean in name too (that leader becomes the ISR and leads
        # in RECOVERING state), and a revert no original replica could lead is refused, as
        # it would leave the partition with neither leader nor ISR.
        if not unclean:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {topic.name}:{partition_id} "
                "because it would require an unclean leader election.",
            )
        if not any(acceptable(b) for b in replicas):
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {topic.name}:{partition_id} "
                "because none of its original replicas may lead.",
            )
    return build_partition_change(
        topic.topic_id,
        partition_id,
        current,
        acceptable,
        target_replicas=replicas,
        target_isr=isr,
        target_adding=(),
        target_removing=(),
        unclean_enabled=unclean,
        min_isr=min_insync_replicas(image, topic.name, local),
    )


def _check_same_factor(
    name: str, partition_id: int, current: PartitionRegistration, target: Sequence[int]
) -> None:
    """The partition's replication factor: its replicas less those a reassignment in
    progress is removing (its target's size)."""
    factor = len(current.replicas) - len(current.removing_replicas)
    if len(target) != factor:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor of partition {name}-{partition_id} would change from "
            f"{factor} to {len(target)}, and allowReplicationFactorChange is false.",
        )


def alter_partition_reassignments(
    image: MetadataImage,
    requests: Mapping[TopicPartition, Sequence[int] | None],
    local: LocalConfig = NO_LOCAL_CONFIG,
    keep_replication_factor: bool = False,
) -> tuple[list[Message], dict[TopicPartition, ApiError | None]]:
    """AlterPartitionReassignments: per partition, a target replica list starts (or
    replaces) a reassignment, None cancels the one in progress. Records for those that go
    ahead and a result for each (None, or the error); as in Kafka, the records of one
    request are meant to be committed together. With `keep_replication_factor` (Kafka's
    allowReplicationFactorChange=false, KIP-860) a target of another size than the
    partition's replication factor is refused."""
    records: list[Message] = []
    results: dict[TopicPartition, ApiError | None] = {}
    for (name, partition_id), target in requests.items():
        try:
            topic, current = _find(image, name, partition_id)
            if target is None:
                record = _cancel(image, topic, partition_id, current, local)
            else:
                if keep_replication_factor:
                    _check_same_factor(name, partition_id, current, target)
                record = _start(image, topic, partition_id, current, target, local)
        except ApiError as error:
            results[name, partition_id] = error
            continue
        if record is not None:
            records.append(record)
        results[name, partition_id] = None
    return records, results


def complete_reassignments(
    image: MetadataImage, local: LocalConfig = NO_LOCAL_CONFIG
) -> list[Message]:
    """Records finishing every reassignment whose ISR now allows it (see _completed). The
    controller runs this after committing an ISR change: that is when one can finish."""
    records: list[Message] = []
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        for partition_id in sorted(topic.partitions):
            p = topic.partitions[partition_id]
            if not in_progress(p):
                continue
            if _completed(p.replicas, p.isr, p.adding_replicas, p.removing_replicas) is None:
                continue
            # As Kafka's AlterPartition handling: the topic's unclean.leader.election.enable
            # decides whether a leader may come from outside the ISR.
            record = _change(
                image,
                topic,
                partition_id,
                p,
                p.replicas,
                p.adding_replicas,
                p.removing_replicas,
                unclean=unclean_election_enabled(image, topic.name, local),
                local=local,
            )
            if record is not None:
                records.append(record)
    return records


def list_partition_reassignments(
    image: MetadataImage, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, OngoingReassignment]:
    """ListPartitionReassignments: the reassignments in progress, of `partitions` or of all;
    as in Kafka, an unknown partition or one not being reassigned is simply not listed."""
    if partitions is None:
        partitions = (
            (name, partition_id)
            for name in sorted(image.topics.by_name)
            for partition_id in sorted(image.topics.by_name[name].partitions)
        )
    out: dict[TopicPartition, OngoingReassignment] = {}
    for name, partition_id in partitions:
        p = image.topics.partition(name, partition_id)
        if p is not None and in_progress(p):
            out[name, partition_id] = OngoingReassignment(
                p.replicas, p.adding_replicas, p.removing_replicas
            )
    return out
