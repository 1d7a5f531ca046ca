"""AlterPartition: a partition leader asks the controller to change its ISR (Kafka's
AlterPartition, KIP-497, with KIP-841's and KIP-903's checks).

The leader sends the ISR it wants with the leader epoch and partition epoch it last saw;
the controller accepts only a proposal made against the current registration, so a stale
or fenced leader cannot undo a newer change:
- the sender must be a registered broker with its current broker epoch (STALE_BROKER_EPOCH)
  and the partition's leader (NOT_LEADER_OR_FOLLOWER);
- a leader epoch other than the current one: FENCED_LEADER_EPOCH; a partition epoch other
  than the current one: INVALID_UPDATE_VERSION;
- every new ISR member must be a replica, unfenced and not shutting down, and the leader
  must stay in it: else INELIGIBLE_REPLICA (a follower of a fenced broker must not come
  back in, KIP-841);
- a leader in RECOVERING state may report RECOVERED, never the reverse (INVALID_REQUEST).
The ELR follows the ISR (partition_change.next_elr, KIP-966): a member dropped while the
ISR is below min.insync.replicas joins it; the ELR empties once the ISR is back at it.
An accepted proposal becomes a PartitionChangeRecord; the answer is the registration it
leads to (the partition epoch one higher). The controller runs
alter_partition_completing_reassignments: an ISR that grew may finish a reassignment, and the
records finishing it go in the same batch as the ISR change, so the two commit together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from metadata.broker_lifecycle import may_lead, min_insync_replicas
from metadata.config_control import NO_LOCAL_CONFIG, LocalConfig
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import MetadataImage, PartitionRegistration
from metadata.partition_change import next_elr
from metadata.reassignment import complete_reassignments
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb


@dataclass(frozen=True)
class IsrProposal:
    topic_id: bytes
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = pb.RECOVERED


@dataclass(frozen=True)
class IsrResult:
    topic_id: bytes
    partition_id: int
    error: ApiError | None = None
    registration: PartitionRegistration | None = None  # as it will be once committed


def alter_partition(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    proposals: Sequence[IsrProposal],
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> tuple[list[Message], list[IsrResult]]:
    """`local`: the controller's node id and static configs, for min.insync.replicas."""
    broker = image.cluster.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch:
        raise ApiError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Broker {broker_id} epoch {broker_epoch} is not its current registration.",
        )
    records: list[Message] = []
    results = []
    for proposal in proposals:
        try:
            record, after = _check(image, broker_id, proposal, local)
        except ApiError as error:
            results.append(IsrResult(proposal.topic_id, proposal.partition_id, error))
            continue
        records.append(record)
        results.append(IsrResult(proposal.topic_id, proposal.partition_id, None, after))
    return records, results


def alter_partition_completing_reassignments(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    proposals: Sequence[IsrProposal],
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> tuple[list[Message], list[IsrResult]]:
    """AlterPartition as the controller runs it: the ISR changes, then, when an ISR grew on a
    partition being reassigned (its new replicas caught up), the records finishing every
    reassignment that now can, computed on the image after the ISR changes, all one batch
    (as Kafka's PartitionChangeBuilder finishes a reassignment in the ISR change itself)."""
    records, results = alter_partition(image, broker_id, broker_epoch, proposals, local)
    if any(r.registration is not None and r.registration.adding_replicas for r in results):
        after = MetadataDelta(image).replay_all(records).apply(image.offset, image.epoch)
        records += complete_reassignments(after, local)
    return records, results


def _check(
    image: MetadataImage, broker_id: int, proposal: IsrProposal, local: LocalConfig
) -> tuple[pb.PartitionChangeRecord, PartitionRegistration]:
    topic = image.topics.by_id.get(proposal.topic_id)
    current = None if topic is None else topic.partitions.get(proposal.partition_id)
    if topic is None or current is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Partition {proposal.partition_id} of topic id {proposal.topic_id.hex()} does "
            "not exist.",
        )
    where = f"{topic.name}-{proposal.partition_id}"
    if current.leader != broker_id:
        raise ApiError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"Broker {broker_id} is not the leader of {where} (the leader is {current.leader}).",
        )
    if proposal.leader_epoch != current.leader_epoch:
        raise ApiError(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"{where}: leader epoch {proposal.leader_epoch} is not the current "
            f"{current.leader_epoch}.",
        )
    if proposal.partition_epoch != current.partition_epoch:
        raise ApiError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"{where}: partition epoch {proposal.partition_epoch} is not the current "
            f"{current.partition_epoch}.",
        )
    acceptable = may_lead(image)
    bad = [b for b in proposal.new_isr if b not in current.replicas or not acceptable(b)]
    if (
        bad
        or broker_id not in proposal.new_isr
        or len(set(proposal.new_isr)) != len(proposal.new_isr)
    ):
        raise ApiError(
            ErrorCode.INELIGIBLE_REPLICA,
            f"{where}: the proposed ISR {list(proposal.new_isr)} must hold the leader and only "
            f"replicas that are unfenced and not shutting down; not eligible: {bad}.",
        )
    if current.leader_recovery_state == pb.RECOVERED and (
        proposal.leader_recovery_state == pb.RECOVERING
    ):
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"{where}: a recovered leader cannot go back to RECOVERING."
        )
    record = pb.PartitionChangeRecord(partition_id=proposal.partition_id, topic_id=topic.topic_id)
    record.isr.SetInParent()
    record.isr.ids.extend(proposal.new_isr)
    elr = next_elr(
        current.replicas,
        current.isr,
        proposal.new_isr,
        current.elr,
        min_insync_replicas(image, topic.name, local),
    )
    if elr != current.elr:
        record.eligible_leader_replicas.SetInParent()
        record.eligible_leader_replicas.ids.extend(elr)
    if proposal.leader_recovery_state != current.leader_recovery_state:
        record.leader_recovery_state = proposal.leader_recovery_state  # type: ignore[assignment]
    return record, current.merge(record)


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int, block_size: int = 1000
) -> tuple[pb.ProducerIdsRecord, int]:
    """A block of producer ids for a broker's idempotent producers (Kafka's
    AllocateProducerIds): the record moving the next free id on, and the block's first id."""
    broker = image.cluster.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch:
        raise ApiError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Broker {broker_id} epoch {broker_epoch} is not its current registration.",
        )
    first = image.producer_ids.next_producer_id
    return (
        pb.ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + block_size
        ),
        first,
    )
