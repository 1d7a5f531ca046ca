"""The answer to a Metadata request, as every front end gives it: gRPC's ClientService
(server/client_service.py) and the Kafka protocol listener (server/kafka/metadata_api.py)
call `metadata_answer` and only convert its result to their wire types, so the rules are
written once: which brokers are listed (unfenced ones, with their endpoint for the listener
the request came in on, as Kafka answers), which topics the principal may see (DESCRIBE),
auto-creation of missing named topics (auto.create.topics.enable, the request's
allow_auto_topic_creation, CREATE), and each partition's leader, epoch, replicas, ISR and
offline replicas from the broker's metadata image.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.loop_slices import LoopSlices
from metadata.errors import ApiError
from metadata.image import MetadataImage
from metadata.topic_control import INTERNAL_TOPICS
from server.request_authorization import RequestAuthorizer
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True)
class BrokerAnswer:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionAnswer:
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: ApiError | None = None


@dataclass(frozen=True)
class TopicAnswer:
    name: str
    error: ApiError | None = None
    topic_id: bytes = b""  # empty when the topic is not known
    is_internal: bool = False
    partitions: tuple[PartitionAnswer, ...] = ()


@dataclass(frozen=True)
class MetadataAnswer:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerAnswer, ...]
    topics: tuple[TopicAnswer, ...]


@dataclass(frozen=True)
class MetadataSources:
    """What a Metadata answer reads besides the request: the broker's own facts and the
    collaborators that authorize and auto-create."""

    cluster_id: str
    controller_id: Callable[[], int]
    authz: RequestAuthorizer
    # Creates topics with the cluster's defaults; None: this broker never auto-creates.
    create_topics: Callable[[list[str]], Awaitable[list[str]]] | None
    auto_create_topics: bool  # auto.create.topics.enable


async def metadata_answer(
    image: MetadataImage,
    names: list[str] | None,
    allow_auto_topic_creation: bool,
    listener_name: str,
    sources: MetadataSources,
) -> MetadataAnswer:
    """`names` None asks for every topic (those the principal may not DESCRIBE left out);
    named topics the principal may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED."""
    authz = sources.authz
    refused: dict[str, ApiError]
    if names is not None:
        # Each topic once, as Kafka's KafkaApis answers (it takes the names as a set): a
        # request naming one topic 100,000 times made an answer of 100,000 copies.
        names = list(dict.fromkeys(names))
        refused = dict(authz.topics("Metadata", names))
    else:
        names = authz.visible_topics(sorted(image.topics.by_name))
        refused = {}
    # Internal topics are created by their owners (the group coordinator), never here.
    missing = [
        n
        for n in names
        if n not in image.topics.by_name and n not in INTERNAL_TOPICS and n not in refused
    ]
    created: set[str] = set()
    if (
        missing
        and allow_auto_topic_creation
        and sources.auto_create_topics
        and sources.create_topics is not None
    ):
        refused.update(authz.create_topics("Metadata", missing))
        creatable = [n for n in missing if n not in refused]
        if creatable:
            created = set(await sources.create_topics(creatable))
    topics = []
    slices = LoopSlices()  # every topic of a large cluster, or 100,000 names: in slices
    for name in names:
        topic = (
            TopicAnswer(name, error=refused[name])
            if name in refused
            else _topic(image, name, name in created)
        )
        topics.append(topic)
        await slices.step(1 + len(topic.partitions))
    return MetadataAnswer(
        sources.cluster_id, sources.controller_id(), _brokers(image, listener_name), tuple(topics)
    )


def _brokers(image: MetadataImage, listener_name: str) -> tuple[BrokerAnswer, ...]:
    """Every unfenced broker's endpoint for `listener_name` (one without it is left out)."""
    out = []
    for broker_id, broker in sorted(image.cluster.brokers.items()):
        if broker.fenced:
            continue
        endpoint = next((e for e in broker.endpoints if e.name == listener_name), None)
        if endpoint is not None:
            out.append(BrokerAnswer(broker_id, endpoint.host, endpoint.port, broker.rack or None))
    return tuple(out)


def _topic(image: MetadataImage, name: str, just_created: bool) -> TopicAnswer:
    internal = name in INTERNAL_TOPICS
    topic = image.topics.by_name.get(name)
    if topic is None:
        if just_created:
            error = ApiError(ErrorCode.LEADER_NOT_AVAILABLE, f"Topic '{name}' is being created.")
        else:
            error = ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic: {name}.",
            )
        return TopicAnswer(name, error=error, is_internal=internal)
    live = set(image.cluster.unfenced())
    partitions = []
    for index, registration in sorted(topic.partitions.items()):
        partitions.append(
            PartitionAnswer(
                index,
                registration.leader,
                registration.leader_epoch,
                tuple(registration.replicas),
                tuple(registration.isr),
                tuple(r for r in registration.replicas if r not in live),
                None
                if registration.has_leader
                else ApiError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"{name}-{index} has no leader right now."
                ),
            )
        )
    return TopicAnswer(name, None, topic.topic_id, internal, tuple(partitions))
