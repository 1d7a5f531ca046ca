"""ElectLeaders (KIP-460) and the automatic leader rebalance, as the active controller runs
them (after Kafka's ReplicationControlManager.electLeaders and the ZooKeeper controller's
checkAndTriggerAutoLeaderRebalance).

Both take the current image and return records, changing nothing themselves.

ElectLeaders, per partition, with Kafka's errors:
- PREFERRED moves leadership to the first replica (the preferred one) when it is in the ISR
  and may lead. ELECTION_NOT_NEEDED if it leads already; PREFERRED_LEADER_NOT_AVAILABLE if
  it is out of the ISR, fenced or shutting down.
- UNCLEAN gives a leaderless partition a leader: from the ISR if any member may lead, else
  the first replica that may lead, which becomes the whole ISR and leads in RECOVERING state
  (the operator asked, so the topic's unclean.leader.election.enable does not matter).
  ELECTION_NOT_NEEDED if the partition has a leader; ELIGIBLE_LEADERS_NOT_AVAILABLE if no
  replica may lead.
- UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
`partitions=None` means every partition (Kafka: topicPartitions null). As Kafka does, that
form leaves out of the results the partitions that needed no election, so the answer lists
what was tried, not the whole cluster; an explicit list gets a result for every entry.

The rebalance (auto.leader.rebalance.enable, leader.imbalance.per.broker.percentage): a
broker's imbalance is the share of the partitions whose preferred replica it is that it does
not lead; above the percentage, preferred elections run for those partitions where the
preferred replica can take over. Kafka's KRaft controller ignores the percentage and
rebalances every imbalanced partition; this follows the documented setting (and the
ZooKeeper controller), so a few stray leaders do not cause a burst of leader changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from google.protobuf.message import Message

from metadata.broker_lifecycle import may_lead, min_insync_replicas
from metadata.config_control import NO_LOCAL_CONFIG, LocalConfig
from metadata.errors import ApiError
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.partition_change import Election, build_partition_change
from strom_api.error_codes import ErrorCode

DEFAULT_IMBALANCE_PERCENTAGE = 10  # Kafka's leader.imbalance.per.broker.percentage default

TopicPartition = tuple[str, int]


def _all_partitions(image: MetadataImage) -> Iterator[TopicPartition]:
    for name in sorted(image.topics.by_name):
        for partition_id in sorted(image.topics.by_name[name].partitions):
            yield name, partition_id


def elect_leaders(
    image: MetadataImage,
    partitions: Sequence[TopicPartition] | None,
    election: Election,
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> tuple[list[Message], dict[TopicPartition, ApiError | None]]:
    """Records electing leaders for `partitions` (None: all), and a result per partition:
    None for an election that happens, else the ApiError saying why not."""
    if election is Election.ONLINE:
        # The wire's ElectionType has only PREFERRED (0) and UNCLEAN (1).
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election.value}")
    acceptable = may_lead(image)
    records: list[Message] = []
    results: dict[TopicPartition, ApiError | None] = {}
    everything = partitions is None
    for topic_partition in _all_partitions(image) if partitions is None else partitions:
        if topic_partition in results:
            continue  # asked twice: one election, not two records built on the same image
        record, error = _elect(image, topic_partition, election, acceptable, local)
        if record is not None:
            records.append(record)
        if everything and error is not None and error.error_name == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        results[topic_partition] = error
    return records, results


def _elect(
    image: MetadataImage,
    topic_partition: TopicPartition,
    election: Election,
    acceptable: Callable[[int], bool],
    local: LocalConfig,
) -> tuple[Message | None, ApiError | None]:
    """One partition's election (Kafka's electLeader): the record, or the error."""
    name, partition_id = topic_partition
    topic = image.topics.by_name.get(name)
    if topic is None:
        return None, ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
    partition = topic.partitions.get(partition_id)
    if partition is None:
        return None, ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{partition_id}"
        )
    if election is Election.PREFERRED:
        preferred = partition.replicas[0]
        if partition.leader == preferred:
            return None, _not_needed()
        # Checked here rather than left to the election: the builder would fall back to
        # another ISR member when the current leader may not lead, and an operator asking
        # for the preferred leader should hear that it is not available, not see a
        # different leader elected.
        if preferred not in partition.isr or not acceptable(preferred):
            return None, _preferred_not_available()
    elif partition.has_leader:
        return None, _not_needed()
    record = build_partition_change(
        topic.topic_id,
        partition_id,
        partition,
        acceptable,
        election=election,
        min_isr=min_insync_replicas(image, name, local),
    )
    if record is None:
        return None, (
            _preferred_not_available()
            if election is Election.PREFERRED
            else ApiError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                "Eligible topic partition leaders are not available.",
            )
        )
    return record, None


def _not_needed() -> ApiError:
    return ApiError(
        ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
    )


def _preferred_not_available() -> ApiError:
    return ApiError(
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
    )


# --- the automatic leader rebalance -----------------------------------------------------------


def _by_preferred(
    image: MetadataImage,
) -> dict[int, list[tuple[TopicImage, int, PartitionRegistration]]]:
    """Every partition, grouped by its preferred replica (the first of its replicas)."""
    groups: dict[int, list[tuple[TopicImage, int, PartitionRegistration]]] = {}
    for name, partition_id in _all_partitions(image):
        topic = image.topics.by_name[name]
        partition = topic.partitions[partition_id]
        if partition.replicas:
            groups.setdefault(partition.replicas[0], []).append((topic, partition_id, partition))
    return groups


def imbalanced_brokers(
    image: MetadataImage, percentage: int = DEFAULT_IMBALANCE_PERCENTAGE
) -> dict[int, float]:
    """Brokers whose leader imbalance ratio is above `percentage` percent, with the ratio
    (0.0 to 1.0, Kafka's imbalanceRatio): of the partitions whose preferred replica is the
    broker, the share it does not lead (a leaderless one counts, as in Kafka)."""
    out: dict[int, float] = {}
    for broker_id, group in sorted(_by_preferred(image).items()):
        not_led = sum(1 for _, _, p in group if p.leader != broker_id)
        ratio = not_led / len(group)
        if ratio > percentage / 100:
            out[broker_id] = ratio
    return out


def rebalance_leaders(
    image: MetadataImage,
    percentage: int = DEFAULT_IMBALANCE_PERCENTAGE,
    local: LocalConfig = NO_LOCAL_CONFIG,
) -> list[Message]:
    """Preferred elections for the partitions of every imbalanced broker that it does not
    lead, where it is in the ISR and may lead (Kafka's canPreferredReplicaBeLeader): the
    others would only fail with PREFERRED_LEADER_NOT_AVAILABLE."""
    imbalanced = imbalanced_brokers(image, percentage)
    if not imbalanced:
        return []
    acceptable = may_lead(image)
    records: list[Message] = []
    for broker_id, group in sorted(_by_preferred(image).items()):
        if broker_id not in imbalanced or not acceptable(broker_id):
            continue
        for topic, partition_id, partition in group:
            if partition.leader == broker_id or broker_id not in partition.isr:
                continue
            record = build_partition_change(
                topic.topic_id,
                partition_id,
                partition,
                acceptable,
                election=Election.PREFERRED,
                min_isr=min_insync_replicas(image, topic.name, local),
            )
            if record is not None:
                records.append(record)
    return records
