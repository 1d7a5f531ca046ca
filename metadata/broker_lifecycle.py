"""Broker membership as the active controller runs it (docs/architecture.md §5, after Kafka's
ClusterControlManager, BrokerHeartbeatManager and ReplicationControlManager):

    register  -> fenced (epoch = the offset of its RegisterBrokerRecord); a restart (a new
                 incarnation) replaces the old registration at once
              -> unfenced once its heartbeats show it has replayed its own registration
              -> fenced again after broker.session.timeout.ms without a heartbeat
    controlled shutdown: leaderships move away first; it may stop once it leads nothing.

Operations take the current image and return records, changing nothing themselves. The one
piece of state outside the image is when each broker last sent a heartbeat, which is not
replicated (Kafka keeps it in memory too): HeartbeatTracker, fed the time by the caller. A
controller that becomes active re-seeds it with "now" for every registered broker, so a
broker that died under the old controller is still fenced one session timeout later.
Fencing a broker, or its controlled shutdown, takes it out of every ISR (keeping a last
member) and moves the leadership of the partitions it led; unfencing gives offline
partitions it can lead their leader back. A heartbeat naming replicas the broker can no
longer serve (their log directory failed) does the same for those partitions alone, as
Kafka's controller does for a broker's offline log directories (KIP-858).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from metadata.config_control import NO_LOCAL_CONFIG, LocalConfig, effective_topic_config
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import Endpoint, MetadataImage
from metadata.partition_change import build_partition_change, isr_without
from metadata.records import NO_LEADER
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb


def may_lead(image: MetadataImage, excluded: int | None = None) -> Callable[[int], bool]:
    """Whether a broker may lead: registered, unfenced, not shutting down (nor `excluded`)."""
    brokers = image.cluster.brokers

    def check(broker_id: int) -> bool:
        b = brokers.get(broker_id)
        return (
            b is not None
            and not b.fenced
            and not b.in_controlled_shutdown
            and broker_id != excluded
        )

    return check


def unclean_election_enabled(
    image: MetadataImage, topic: str, local: LocalConfig = NO_LOCAL_CONFIG
) -> bool:
    """`unclean.leader.election.enable` as `local`'s node applies it: the topic's value,
    else the node's dynamic, the cluster-default or the static broker value (Kafka's
    Boolean.parseBoolean: "true" in any case is true)."""
    value = effective_topic_config(image, topic, "unclean.leader.election.enable", local)
    return value.strip().lower() == "true"


def min_insync_replicas(
    image: MetadataImage, topic: str, local: LocalConfig = NO_LOCAL_CONFIG
) -> int:
    """`min.insync.replicas` as `local`'s node applies it, found in the same places; a
    value that is not an int >= 1 (a typo in server.properties) counts as 1."""
    try:
        return max(int(effective_topic_config(image, topic, "min.insync.replicas", local)), 1)
    except ValueError:
        return 1


# --- partitions when a broker goes or comes ---------------------------------------------------


ReplicaKey = tuple[bytes, int]  # (topic id, partition)


def move_away_from(
    image: MetadataImage,
    broker_id: int,
    lost_data: bool = False,
    only: Collection[ReplicaKey] | None = None,
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> list[Message]:
    """Partition changes for a broker that is fenced or shutting down: out of every ISR
    (unless it is the last member) and, where it led, a new leader from the ISR or the ELR
    (or none). With `only`, for those partitions alone (replicas in a failed log directory).

    `lost_data`: it restarted after an unclean shutdown (KIP-966), so its log may lack
    acknowledged records it once held: it leaves the ISR (even as the last member) and the
    ELR wherever another ISR or ELR member remains to lead instead. Where it is the only one
    left, it stays: its recovered log is then the best copy the controller knows of, and
    taking it out would leave the partition offline until an unclean election (Kafka before
    KIP-966 kept it too; Kafka 4 leaves the partition for its unclean recovery, which Strom
    does not have)."""
    acceptable = may_lead(image, excluded=broker_id)
    records: list[Message] = []
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        configs: tuple[bool, int] | None = None  # resolved for the topics it is in only
        for partition_id in sorted(topic.partitions):
            if only is not None and (topic.topic_id, partition_id) not in only:
                continue
            current = topic.partitions[partition_id]
            in_elr = lost_data and broker_id in current.elr
            if broker_id not in current.isr and current.leader != broker_id and not in_elr:
                continue
            if configs is None:
                configs = (
                    unclean_election_enabled(image, name, local),
                    min_insync_replicas(image, name, local),
                )
            unclean, min_isr = configs
            target_isr = isr_without(current.isr, broker_id)
            others = {*current.isr, *current.elr} - {broker_id}
            drop = lost_data and bool(others)
            if drop:
                target_isr = tuple(b for b in current.isr if b != broker_id)
            change = build_partition_change(
                topic.topic_id,
                partition_id,
                current,
                acceptable,
                target_isr=target_isr,
                unclean_enabled=unclean,
                min_isr=min_isr,
                lost_data=(broker_id,) if drop else (),
            )
            if change is not None:
                records.append(change)
    return records


def leaders_for_offline(
    image: MetadataImage,
    acceptable: Callable[[int], bool],
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> list[Message]:
    """Partition changes giving leaderless partitions a leader where one may now lead."""
    records: list[Message] = []
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        configs: tuple[bool, int] | None = None  # looked up for topics with one offline only
        for partition_id in sorted(topic.partitions):
            current = topic.partitions[partition_id]
            if current.leader != NO_LEADER:
                continue
            if configs is None:
                configs = (
                    unclean_election_enabled(image, name, local),
                    min_insync_replicas(image, name, local),
                )
            change = build_partition_change(
                topic.topic_id,
                partition_id,
                current,
                acceptable,
                unclean_enabled=configs[0],
                min_isr=configs[1],
            )
            if change is not None:
                records.append(change)
    return records


def led_by(image: MetadataImage, broker_id: int) -> int:
    return sum(
        1
        for topic in image.topics.by_id.values()
        for p in topic.partitions.values()
        if p.leader == broker_id
    )


# --- registration -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: bytes
    endpoints: Sequence[Endpoint]
    rack: str | None = None
    # KIP-966: the epoch its clean-shutdown marker held, -1 without one (see register_broker)
    previous_broker_epoch: int = -1


class HeartbeatTracker:
    """When each broker last sent a heartbeat (in the caller's clock, milliseconds)."""

    def __init__(self, session_timeout_ms: int = 9000) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.last_contact: dict[int, int] = {}
        # Per broker id, the incarnations a newer one replaced (register_broker).
        self._replaced: dict[int, set[bytes]] = {}

    def reseed(self, image: MetadataImage, now_ms: int) -> None:
        """A newly active controller knows nothing of past heartbeats: every registered
        broker gets a full session from now."""
        self.last_contact = {b: now_ms for b in image.cluster.brokers}

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact[broker_id] = now_ms

    def forget(self, broker_id: int) -> None:
        self.last_contact.pop(broker_id, None)

    def replaced(self, broker_id: int, incarnation_id: bytes) -> None:
        self._replaced.setdefault(broker_id, set()).add(incarnation_id)

    def was_replaced(self, broker_id: int, incarnation_id: bytes) -> bool:
        return incarnation_id in self._replaced.get(broker_id, ())

    def session_alive(self, broker_id: int, now_ms: int) -> bool:
        last = self.last_contact.get(broker_id)
        return last is not None and now_ms - last < self.session_timeout_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session ran out: the controller fences them."""
        return sorted(
            b.broker_id
            for b in image.cluster.brokers.values()
            if not b.fenced and not self.session_alive(b.broker_id, now_ms)
        )


def restarted_uncleanly(image: MetadataImage, request: BrokerRegistrationRequest) -> bool:
    """A new incarnation of a registered broker whose clean-shutdown marker does not name
    its registered epoch (KIP-966): it crashed, or its marker is from another life."""
    existing = image.cluster.brokers.get(request.broker_id)
    return (
        existing is not None
        and existing.incarnation_id != request.incarnation_id
        and request.previous_broker_epoch != existing.epoch
    )


def register_broker(
    image: MetadataImage,
    tracker: HeartbeatTracker,
    request: BrokerRegistrationRequest,
    record_offset: int,
    now_ms: int,
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> tuple[list[Message], int]:
    """Records registering the broker, and its broker epoch: `record_offset`, the offset its
    RegisterBrokerRecord will have.

    A broker process makes a new incarnation id each time it starts (KIP-631), which tells
    the three cases apart:
    - the incarnation already registered: the same request again (its answer was lost), so
      no records and the epoch it already has;
    - a new incarnation: the broker restarted. Its new registration replaces the old one at
      once, fenced, with a new epoch (heartbeats of the old epoch are STALE_BROKER_EPOCH from
      then on), and the partitions it led move away first, as on fencing. Waiting for the
      old session to expire instead (Kafka refuses DUPLICATE_BROKER_REGISTRATION while it
      lasts) kept every restarted broker out for broker.session.timeout.ms, and a whole
      restarted cluster out of RF-3 topic creation;
    - an incarnation that was replaced before: a second live process with this node.id (two
      processes configured alike), or a late request of a dead one. Kafka's rule decides
      here: DUPLICATE_BROKER_REGISTRATION while the registration it would replace is
      unfenced and its session alive, so two live processes do not take the registration
      from each other in turn; once that registration is fenced or silent (a dead process's
      late request replaced the live one), it may register again. The controller remembers
      replaced incarnations in memory (HeartbeatTracker), as it does sessions.

    Unclean-shutdown detection (KIP-966): a broker that shut down cleanly wrote its broker
    epoch down and sends it back here. Any other value means it crashed and may have lost
    records it had not flushed, acknowledged ones among them (acks=all waits for replicas'
    memory, not their disks): it leaves every ISR and ELR where another replica can lead
    (move_away_from with lost_data), so it cannot lead over, and truncate, replicas that
    kept those records."""
    existing = image.cluster.brokers.get(request.broker_id)
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        tracker.touch(request.broker_id, now_ms)
        return [], existing.epoch
    if (
        existing is not None
        and tracker.was_replaced(request.broker_id, request.incarnation_id)
        and tracker.session_alive(request.broker_id, now_ms)
        and not existing.fenced
    ):
        raise ApiError(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            f"Another broker is registered with broker id {request.broker_id}: this "
            "process's registration was replaced by a newer one (is node.id "
            f"{request.broker_id} configured on two nodes?).",
        )
    records: list[Message] = []
    if existing is not None:
        lost_data = restarted_uncleanly(image, request)
        records += move_away_from(image, request.broker_id, lost_data=lost_data, local=local)
        tracker.replaced(request.broker_id, existing.incarnation_id)
    records.insert(
        0,
        pb.RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=record_offset,
            endpoints=[e.to_pb() for e in request.endpoints],
            rack=request.rack or "",
            fenced=True,
        ),
    )
    tracker.touch(request.broker_id, now_ms)
    return records, record_offset


# --- heartbeats -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the offset after the last record the broker replayed
    want_fence: bool = False
    want_shutdown: bool = False
    # Replicas in the broker's failed log directories (Kafka's OfflineLogDirs).
    offline_replicas: frozenset[ReplicaKey] = frozenset()


@dataclass(frozen=True)
class HeartbeatResponse:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


def heartbeat(
    image: MetadataImage,
    tracker: HeartbeatTracker,
    request: HeartbeatRequest,
    now_ms: int,
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> tuple[list[Message], HeartbeatResponse]:
    """A broker's heartbeat: records for the state it moves to, and the answer, which
    describes the state once those records are committed."""
    broker = image.cluster.brokers.get(request.broker_id)
    if broker is None:
        raise ApiError(
            ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {request.broker_id} is not registered."
        )
    if broker.epoch != request.broker_epoch:
        raise ApiError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"Broker {request.broker_id} epoch {request.broker_epoch} is not the current "
            f"epoch {broker.epoch}.",
        )
    tracker.touch(request.broker_id, now_ms)
    caught_up = request.current_metadata_offset > broker.epoch  # it replayed its registration
    records: list[Message] = []
    fenced = broker.fenced
    if request.want_shutdown and not broker.in_controlled_shutdown:
        records.append(
            pb.BrokerRegistrationChangeRecord(
                broker_id=broker.broker_id,
                broker_epoch=broker.epoch,
                in_controlled_shutdown=True,
            )
        )
        records += move_away_from(image, broker.broker_id, local=local)
    elif request.want_fence and not fenced:
        records += fence_broker(image, broker.broker_id, local)
        fenced = True
    elif fenced and caught_up and not request.want_fence and not broker.in_controlled_shutdown:
        records += unfence_broker(image, broker.broker_id, local)
        fenced = False
    if request.offline_replicas and not fenced and not request.want_shutdown:
        # Every heartbeat names them again; once they are moved this finds nothing to do.
        records += move_away_from(
            image, broker.broker_id, only=request.offline_replicas, local=local
        )
    should_stop = False
    if request.want_shutdown or broker.in_controlled_shutdown:
        # It may stop once it leads nothing, as it will once these records apply (a
        # partition no other replica may lead stays with it, and so does the broker).
        after = MetadataDelta(image).replay_all(records).apply(image.offset, image.epoch)
        should_stop = led_by(after, broker.broker_id) == 0
    return records, HeartbeatResponse(caught_up, fenced, should_stop)


def fence_broker(
    image: MetadataImage, broker_id: int, local: LocalConfig = NO_LOCAL_CONFIG
) -> list[Message]:
    broker = image.cluster.brokers[broker_id]
    return [
        pb.FenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch),
        *move_away_from(image, broker_id, local=local),
    ]


def unfence_broker(
    image: MetadataImage, broker_id: int, local: LocalConfig = NO_LOCAL_CONFIG
) -> list[Message]:
    broker = image.cluster.brokers[broker_id]
    base = may_lead(image)
    return [
        pb.UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch),
        *leaders_for_offline(image, lambda b: b == broker_id or base(b), local),
    ]


def unregister_broker(
    image: MetadataImage, broker_id: int, local: LocalConfig = NO_LOCAL_CONFIG
) -> list[Message]:
    broker = image.cluster.brokers.get(broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    return [
        *move_away_from(image, broker_id, local=local),
        pb.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch),
    ]
