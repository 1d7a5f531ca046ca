"""CreateTopics (key 19), DeleteTopics (20) and CreatePartitions (37) on the Kafka listener.

Each request is converted to the controller's (strom_api controller.proto) and sent on the
path the gRPC front end's admin requests take (server/controller_forwarder.py
authorized_forwarding: the caller's principal authorized by server/controller_authorization,
then forwarded to the active controller, where metadata/topic_control.py makes every check);
the answer is converted back to the request's version. What is checked here is only what
the controller's messages cannot carry: a null config value, a topic named twice where the
controller's request has no room for both, and a topic id (DeleteTopics v6) resolved to its
name.

Decided as Kafka 4: the requests' `timeout` is not a deadline for the controller (Strom
answers once the controller has committed, or REQUEST_TIMED_OUT after the forwarder's 30 s,
as the gRPC path does); a topic id is resolved from this broker's image (Kafka's controller
resolves it from its own, which may be a little ahead: an id created a moment ago may be
UNKNOWN_TOPIC_ID here for as long as this broker trails).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.constants import uuid_zero
from kio.static.primitive import i8, i16, i32

from metadata.image import MetadataImage
from server.controller_forwarder import ControllerCall, NotForwarded
from server.kafka.apis import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS
from server.kafka.config_entries import source_id
from server.kafka.controller_answers import (
    NO_ERROR,
    Outcome,
    item_outcome,
    not_forwarded,
    whole_outcome,
)
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import collected, each
from strom_api.v1 import controller_pb2
from strom_api.v1 import metadata_pb2 as mpb

_NO_THROTTLE = datetime.timedelta(0)
# Forwarded CreatePartitions calls one request has in flight at most (one per topic).
CREATE_PARTITIONS_IN_FLIGHT = 16


class TopicAdmin:
    def __init__(self, call: ControllerCall, image: Callable[[], MetadataImage]) -> None:
        self.call = call
        self.image = image

    # --- CreateTopics -------------------------------------------------------------------

    async def create_topics(self, request: Request) -> Any:
        body = request.body
        refused: dict[str, Outcome] = {}
        topics: dict[str, Any] = {}
        # Every loop over the topics in loop slices: a 1 MB request names 50,000 of them.
        async for topic in each(body.topics):
            name = str(topic.name)
            if name in topics or name in refused:
                # Kafka answers a name given twice once, INVALID_REQUEST (its controller's
                # check, which a request holding it once cannot reach).
                topics.pop(name, None)
                refused[name] = (
                    KafkaErrorCode.invalid_request,
                    f"Found multiple entries for topic '{name}'.",
                )
                continue
            nulls = [c.name for c in topic.configs if c.value is None]
            if nulls:
                refused[name] = (
                    KafkaErrorCode.invalid_config,
                    "Null value not supported for topic configs: " + ", ".join(nulls),
                )
                continue
            topics[name] = controller_pb2.CreatableTopic(
                name=name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments={
                    int(a.partition_index): mpb.BrokerIdList(ids=[int(b) for b in a.broker_ids])
                    for a in topic.assignments
                },
                configs={c.name: c.value for c in topic.configs},
            )
        results: dict[str, Any] = {}
        failed: Outcome | None = None
        if topics:
            try:
                response = await self.call(
                    "CreateTopics",
                    controller_pb2.CreateTopicsRequest(
                        topics=topics.values(), validate_only=body.validate_only
                    ),
                )
            except NotForwarded as exc:
                failed = not_forwarded(exc.error_name, str(exc))
            else:
                failed = whole_outcome(response)
                results = {r.name: r for r in response.topics}
        response_type = load_response_schema(CREATE_TOPICS, request.api_version)
        result_type = nested(response_type, "CreatableTopicResult")
        out: list[Any] = []
        async for name in each(dict.fromkeys(await collected(str(t.name) for t in body.topics))):
            result = results.get(name)
            if name in refused or result is None:
                error = refused.get(name) or failed or _missing(name)
                out.append(_created(response_type, result_type, name, error, None))
            else:
                out.append(_created(response_type, result_type, name, item_outcome(result), result))
        return build(response_type, throttle_time=_NO_THROTTLE, topics=tuple(out))

    # --- DeleteTopics -------------------------------------------------------------------

    async def delete_topics(self, request: Request) -> Any:
        """Kafka's ControllerApis.deleteTopics: entries that name both or neither, names and
        ids given twice are answered INVALID_REQUEST and not deleted; ids are resolved to
        names; the rest goes to the controller by name."""
        asked = _asked_deletions(request)
        answers: list[tuple[str | None, uuid.UUID | None, Outcome]] = []
        names: Counter[str] = Counter()
        ids: Counter[uuid.UUID] = Counter()
        async for name, topic_id in each(asked):
            if name is None and topic_id is None:
                answers.append((None, None, _invalid("Neither topic name nor id were specified.")))
            elif name is not None and topic_id is not None:
                answers.append(
                    (name, topic_id, _invalid("You may not specify both topic name and topic id."))
                )
            elif name is not None:
                names[name] += 1
            else:
                assert topic_id is not None
                ids[topic_id] += 1
        answers += [(n, None, _invalid("Duplicate topic name.")) for n, c in names.items() if c > 1]
        answers += [(None, i, _invalid("Duplicate topic id.")) for i, c in ids.items() if c > 1]
        image = self.image()
        by_id = {t.topic_id: t.name for t in image.topics.by_name.values()}
        wanted: dict[str, uuid.UUID | None] = {n: None for n, c in names.items() if c == 1}
        async for topic_id, count in each(ids.items()):
            found = by_id.get(topic_id.bytes)
            if count > 1:
                continue
            if found is None:
                answers.append(
                    (
                        None,
                        topic_id,
                        (
                            KafkaErrorCode.unknown_topic_id,
                            "This server does not host this topic ID.",
                        ),
                    )
                )
            elif found in wanted:  # by its name and by its id: asked twice
                del wanted[found]
                answers.append((found, topic_id, _invalid("Duplicate topic name.")))
            else:
                wanted[found] = topic_id
        results: dict[str, Outcome] = {}
        if wanted:
            try:
                response = await self.call(
                    "DeleteTopics", controller_pb2.DeleteTopicsRequest(names=list(wanted))
                )
            except NotForwarded as exc:
                results = dict.fromkeys(wanted, not_forwarded(exc.error_name, str(exc)))
            else:
                whole = whole_outcome(response)
                results = {r.name: whole or item_outcome(r) for r in response.topics}
        async for name, asked_id in each(wanted.items()):
            topic = image.topics.by_name.get(name)
            topic_id = asked_id or (uuid.UUID(bytes=topic.topic_id) if topic else None)
            answers.append((name, topic_id, results.get(name) or _missing(name)))
        response_type = load_response_schema(DELETE_TOPICS, request.api_version)
        result_type = nested(response_type, "DeletableTopicResult")
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            responses=tuple(
                await collected(
                    build(
                        result_type,
                        name=name,
                        topic_id=topic_id or uuid_zero,
                        error_code=code,
                        error_message=message,
                    )
                    for name, topic_id, (code, message) in answers
                )
            ),
        )

    # --- CreatePartitions ---------------------------------------------------------------

    async def create_partitions(self, request: Request) -> Any:
        body = request.body
        counts = Counter(str(t.name) for t in body.topics)
        # The controller's CreatePartitions takes one topic: a request naming 30,000 would
        # otherwise put 30,000 forwarded calls in flight at once.
        calls = asyncio.Semaphore(CREATE_PARTITIONS_IN_FLIGHT)

        async def one(topic: Any) -> Outcome:
            name = str(topic.name)
            if counts[name] > 1:
                return KafkaErrorCode.invalid_request, "Duplicate topic name."
            pb_request = controller_pb2.CreatePartitionsRequest(
                name=name, count=topic.count, validate_only=body.validate_only
            )
            for replicas in topic.assignments or ():
                pb_request.assignments.add(ids=[int(b) for b in replicas.broker_ids])
            try:
                async with calls:
                    response = await self.call("CreatePartitions", pb_request)
            except NotForwarded as exc:
                return not_forwarded(exc.error_name, str(exc))
            return whole_outcome(response) or NO_ERROR

        first: dict[str, Any] = {}  # a name given twice is answered once
        async for topic in each(body.topics):
            first.setdefault(str(topic.name), topic)
        unique = list(first.values())
        outcomes = await asyncio.gather(*(one(t) for t in unique))
        response_type = load_response_schema(CREATE_PARTITIONS, request.api_version)
        result_type = nested(response_type, "CreatePartitionsTopicResult")
        results = await collected(
            build(result_type, name=t.name, error_code=code, error_message=message)
            for t, (code, message) in zip(unique, outcomes, strict=True)
        )
        return build(response_type, throttle_time=_NO_THROTTLE, results=tuple(results))


def _asked_deletions(request: Request) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, topic id) per entry: v0-5 name topics, v6 names or ids (the zero id: none)."""
    body = request.body
    if request.api_version < 6:
        return [(str(n), None) for n in body.topic_names]
    return [
        (
            None if t.name is None else str(t.name),
            None if t.topic_id is None or t.topic_id == uuid_zero else t.topic_id,
        )
        for t in body.topics
    ]


def _invalid(message: str) -> Outcome:
    return KafkaErrorCode.invalid_request, message


def _missing(name: str) -> Outcome:
    """A topic the controller's answer left out: a bug, answered rather than dropped."""
    return KafkaErrorCode.unknown_server_error, f"The controller's answer has no result for {name}."


def _created(
    response_type: type[Any], result_type: type[Any], name: str, error: Outcome, result: Any
) -> Any:
    """One CreatableTopicResult; `result` is the controller's (None: refused before)."""
    code, message = error
    ok = result is not None and code == KafkaErrorCode.none
    configs: tuple[Any, ...] = ()
    config_error = KafkaErrorCode.none
    if ok and _has_configs(result_type):
        config_type = nested(response_type, "CreatableTopicConfigs")
        configs = tuple(
            build(
                config_type,
                name=e.name,
                value=None if e.is_sensitive or not e.HasField("value") else e.value,
                read_only=e.read_only,
                config_source=i8(source_id(e.source)),
                is_sensitive=e.is_sensitive,
            )
            for e in result.configs
        )
        config_error = item_outcome(result, "config_error")[0]
    return build(
        result_type,
        name=name,
        topic_id=uuid.UUID(bytes=result.topic_id) if ok and result.topic_id else uuid_zero,
        error_code=code,
        error_message=message,
        topic_config_error_code=i16(config_error.value),
        num_partitions=i32(result.num_partitions if ok else -1),
        replication_factor=i16(result.replication_factor if ok else -1),
        configs=configs,
    )


def _has_configs(result_type: type[Any]) -> bool:
    """Whether this version's result carries the topic's configs (v5+)."""
    return "configs" in {f for f in result_type.__dataclass_fields__}
