"""CreateTopics, DeleteTopics and CreatePartitions as the controller runs them: each takes
the current image and a request and returns the records to write and a result per topic,
changing nothing itself (the records change the image once committed and replayed).

The checks and errors are Kafka's: a legal name (INVALID_TOPIC_EXCEPTION, also for a name
that collides with an existing one once '.' and '_' are taken as equal), a name not taken
(TOPIC_ALREADY_EXISTS), partitions and replication factor or an explicit assignment but not
both (INVALID_REQUEST), a feasible placement (INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT) and valid configs (INVALID_CONFIG).
A topic that fails a check gets its error and no records; the others go ahead.

Limits (placement builds every assignment in memory on the controller's event loop, so a
request for 10^9 partitions once took the active controller down): Kafka's
MAX_PARTITIONS_PER_BATCH, 10,000 new partitions in one request, refused as a whole with
POLICY_VIOLATION before anything is placed; and KIP-578's `max.partitions` (partitions in the
cluster) and `max.broker.partitions` (replicas on one broker), POLICY_VIOLATION for the topic
that would pass them. KIP-578 left both unlimited by default; Strom, a Python broker, defaults
them to what it is built and tested for (PartitionLimits).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from google.protobuf.message import Message

from metadata.errors import ApiError
from metadata.image import MetadataImage
from metadata.placement import place
from metadata.records import new_topic_id
from metadata.topic_configs import validate_topic_configs
from storage.errors import InvalidTopicError
from storage.names import validate_topic
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb

USE_DEFAULT = -1
# Kafka's internal topics: their owners create them; nobody deletes them through DeleteTopics
# (kafka-topics.sh: "is a kafka internal topic and is not allowed to be marked for
# deletion"; Strom refuses it in the controller, so no client can).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = USE_DEFAULT  # the cluster's num.partitions
    replication_factor: int = USE_DEFAULT  # the cluster's default.replication.factor
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> replicas
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicDefaults:
    """Kafka's num.partitions and default.replication.factor."""

    num_partitions: int = 1
    replication_factor: int = 1


@dataclass(frozen=True)
class PartitionLimits:
    """KIP-578's max.partitions and max.broker.partitions (static configs here)."""

    max_partitions: int = 100_000
    max_broker_partitions: int = 20_000


class _PartitionCounts:
    """Partitions in the cluster and replicas per broker, as the image has them plus what
    this request adds, against the limits."""

    def __init__(self, image: MetadataImage, limits: PartitionLimits) -> None:
        self.limits = limits
        self.total = 0
        self.per_broker: Counter[int] = Counter()
        for topic in image.topics.by_name.values():
            self.total += len(topic.partitions)
            for registration in topic.partitions.values():
                self.per_broker.update(registration.replicas)

    def add(self, assignment: Sequence[Sequence[int]]) -> None:
        """Counts `assignment` in, or raises POLICY_VIOLATION (counting nothing)."""
        total = self.total + len(assignment)
        if total > self.limits.max_partitions:
            raise ApiError(
                ErrorCode.POLICY_VIOLATION,
                f"The cluster would have {total} partitions, more than max.partitions="
                f"{self.limits.max_partitions}.",
            )
        added = Counter(b for replicas in assignment for b in replicas)
        for broker, count in sorted(added.items()):
            if self.per_broker[broker] + count > self.limits.max_broker_partitions:
                raise ApiError(
                    ErrorCode.POLICY_VIOLATION,
                    f"Broker {broker} would hold {self.per_broker[broker] + count} partition "
                    f"replicas, more than max.broker.partitions="
                    f"{self.limits.max_broker_partitions}.",
                )
        self.total = total
        self.per_broker.update(added)


def _too_many_in_one_request(count: int) -> ApiError | None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        return ApiError(
            ErrorCode.POLICY_VIOLATION,
            f"Excessively large number of partitions per request: {count}, more than "
            f"{MAX_PARTITIONS_PER_REQUEST}.",
        )
    return None


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: ApiError | None = None
    topic_id: bytes = b""
    num_partitions: int = USE_DEFAULT
    replication_factor: int = USE_DEFAULT


def usable_brokers(image: MetadataImage) -> dict[int, str | None]:
    """Brokers that may take new replicas and lead: unfenced, not shutting down; with racks."""
    return {
        b.broker_id: b.rack
        for b in image.cluster.brokers.values()
        if not b.fenced and not b.in_controlled_shutdown
    }


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def create_topics(
    image: MetadataImage,
    topics: Sequence[NewTopic],
    *,
    defaults: TopicDefaults = TopicDefaults(),
    limits: PartitionLimits = PartitionLimits(),
    start: int = 0,
    topic_id_factory: Callable[[], bytes] = new_topic_id,
) -> tuple[list[Message], list[CreateTopicResult]]:
    records: list[Message] = []
    results = []
    requested = sum(
        len(t.assignments)
        if t.assignments is not None
        else defaults.num_partitions
        if t.num_partitions == USE_DEFAULT
        else max(t.num_partitions, 0)
        for t in topics
    )
    too_many = _too_many_in_one_request(requested)
    if too_many is not None:
        return [], [CreateTopicResult(t.name, too_many) for t in topics]
    counts = Counter(t.name for t in topics)
    taken = {_collision_key(n): n for n in image.topics.by_name}
    usable = usable_brokers(image)
    partition_counts = _PartitionCounts(image, limits)
    for topic in topics:
        try:
            if counts[topic.name] > 1:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST, f"Found multiple entries for topic '{topic.name}'."
                )
            topic_records, result = _create_one(
                image, topic, defaults, usable, start, topic_id_factory, taken, partition_counts
            )
        except ApiError as error:
            results.append(CreateTopicResult(topic.name, error))
            continue
        taken[_collision_key(topic.name)] = topic.name
        records += topic_records
        results.append(result)
    return records, results


def _create_one(
    image: MetadataImage,
    topic: NewTopic,
    defaults: TopicDefaults,
    usable: Mapping[int, str | None],
    start: int,
    topic_id_factory: Callable[[], bytes],
    taken: Mapping[str, str],
    partition_counts: _PartitionCounts,
) -> tuple[list[Message], CreateTopicResult]:
    name = topic.name
    try:
        validate_topic(name, 0)
    except InvalidTopicError as exc:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
    if name in image.topics.by_name:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    other = taken.get(_collision_key(name))
    if other is not None:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{name}' collides with existing topic: {other} ('.' and '_' are "
            "treated as the same character in metric names)",
        )
    if topic.assignments is not None:
        if topic.num_partitions != USE_DEFAULT or topic.replication_factor != USE_DEFAULT:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        assignment = _checked_assignment(image, topic.assignments, 0)
    else:
        partitions = (
            defaults.num_partitions if topic.num_partitions == USE_DEFAULT else topic.num_partitions
        )
        factor = (
            defaults.replication_factor
            if topic.replication_factor == USE_DEFAULT
            else topic.replication_factor
        )
        assignment = place(usable, partitions, factor, start=start)
    validate_topic_configs(topic.configs)
    partition_counts.add(assignment)  # last: a topic refused later must not count
    topic_id = topic_id_factory()
    records: list[Message] = [pb.TopicRecord(name=name, topic_id=topic_id)]
    records += _partition_records(topic_id, assignment, usable, first=0)
    records += [
        pb.ConfigRecord(resource_type=pb.TOPIC, resource_name=name, name=k, value=v)
        for k, v in sorted(topic.configs.items())
    ]
    result = CreateTopicResult(name, None, topic_id, len(assignment), len(assignment[0]))
    return records, result


def _checked_assignment(
    image: MetadataImage, assignments: Mapping[int, Sequence[int]], first: int
) -> list[list[int]]:
    """An explicit assignment as Kafka checks it: partitions first.. without gaps, each with
    at least one replica, no replica twice, every broker registered, one replication factor."""
    if not assignments:
        raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica assignment is empty.")
    expected = list(range(first, first + len(assignments)))
    if sorted(assignments) != expected:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Partitions must be numbered {expected[0]}..{expected[-1]} without gaps, got "
            f"{sorted(assignments)}.",
        )
    out = []
    factors = set()
    for partition in expected:
        replicas = list(assignments[partition])
        if not replicas:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Partition {partition} has no replicas."
            )
        if len(set(replicas)) != len(replicas):
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Partition {partition} lists a broker more than once: {replicas}.",
            )
        unknown = [b for b in replicas if b not in image.cluster.brokers]
        if unknown:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{partition} must be registered; {unknown} are not.",
            )
        factors.add(len(replicas))
        out.append(replicas)
    if len(factors) > 1:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "All partitions must have the same number of replicas.",
        )
    return out


def _partition_records(
    topic_id: bytes,
    assignment: Sequence[Sequence[int]],
    usable: Mapping[int, str | None],
    first: int,
) -> list[Message]:
    """New partitions: the ISR is the replicas that are up, the leader its first."""
    records: list[Message] = []
    for i, replicas in enumerate(assignment):
        isr = [b for b in replicas if b in usable]
        if not isr:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition "
                f"{first + i} are fenced or in controlled shutdown.",
            )
        records.append(
            pb.PartitionRecord(
                partition_id=first + i,
                topic_id=topic_id,
                replicas=replicas,
                isr=isr,
                leader=isr[0],
            )
        )
    return records


def delete_topics(
    image: MetadataImage, names: Sequence[str]
) -> tuple[list[Message], dict[str, ApiError | None]]:
    records: list[Message] = []
    results: dict[str, ApiError | None] = {}
    for name in names:
        topic = image.topics.by_name.get(name)
        if topic is None:
            results[name] = ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        elif name in INTERNAL_TOPICS:
            results[name] = ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Topic {name} is a Kafka internal topic and is not allowed to be deleted.",
            )
        elif name not in results:
            records.append(pb.RemoveTopicRecord(topic_id=topic.topic_id))
            results[name] = None
    return records, results


def create_partitions(
    image: MetadataImage,
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None = None,
    *,
    limits: PartitionLimits = PartitionLimits(),
    start: int = 0,
) -> list[Message]:
    """Records that grow topic `name` to `count` partitions (Kafka: increase only). New
    partitions keep the topic's replication factor; `assignments` lists their replicas."""
    topic = image.topics.by_name.get(name)
    if topic is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    current = len(topic.partitions)
    too_many = _too_many_in_one_request(count - current)
    if too_many is not None:
        raise too_many
    if count < current:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{count}.",
        )
    if count == current:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    usable = usable_brokers(image)
    factor = len(next(iter(topic.partitions.values())).replicas)
    if assignments is not None:
        if len(assignments) != count - current:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {count - current} but "
                f"{len(assignments)} assignments provided.",
            )
        assignment = _checked_assignment(
            image, {current + i: r for i, r in enumerate(assignments)}, current
        )
        if len(assignment[0]) != factor:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The new partitions must have the topic's replication factor, {factor}.",
            )
    else:
        assignment = place(usable, count - current, factor, start=start, first_partition=current)
    _PartitionCounts(image, limits).add(assignment)
    return _partition_records(topic.topic_id, assignment, usable, first=current)
