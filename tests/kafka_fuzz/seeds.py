"""A well-formed request of any served API and version, built from kio's schema: every field
given a value a Kafka client would send, naming the topics, partitions, groups and brokers
the cluster has, so that a mutation of one field reaches the code behind the others.

Requests that change a topic (DESTRUCTIVE) name the victim topic, so that the topics the
data requests read and write keep their shape for the whole run. The membership APIs name
a group of their own (a JoinGroup in a group with members waits for them to rejoin)."""

from __future__ import annotations

import datetime
import random
import struct
import uuid
from dataclasses import dataclass, fields, replace
from typing import Any

from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from tests.fuzz.batches import valid_batch

PRODUCE, METADATA, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 0, 3, 11, 12, 13, 14
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, ALTER_CONFIGS, CREATE_PARTITIONS = 19, 20, 21, 33, 37
INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION_REASSIGNMENTS, DESCRIBE_QUORUM = 44, 45, 55
DESTRUCTIVE = frozenset(
    {
        DELETE_TOPICS,
        DELETE_RECORDS,
        ALTER_CONFIGS,
        CREATE_PARTITIONS,
        INCREMENTAL_ALTER_CONFIGS,
        ALTER_PARTITION_REASSIGNMENTS,
    }
)
MEMBERSHIP = frozenset({JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP})

TOPIC_NAME_FIELDS = frozenset({"name", "topic", "topic_name"})
# Arrays a client leaves empty (or null) unless it means them: a full fetch forgets no
# topics, the broker assigns replicas itself, and the SCRAM user is upserted, not deleted.
UNSET_ARRAYS = frozenset({"forgotten_topics_data", "assignments", "deletions"})
# Numbers a client would send, by field name (the rest: -1 for epochs, generations and
# producer ids, else 0).
ANY_OF = {
    "acks": (-1, -1, 1, 0),
    "isolation_level": (0, 1),
    "timestamp": (-1, -2, -3, 1_700_000_000_000),  # latest, earliest, max timestamp, a time
    "offset": (0, 1),
    "committed_offset": (0, 1, 2, 3),
    "num_partitions": (1, 2, 3),
    "replication_factor": (3, -1),
}
NUMBERS = {
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "session_epoch": -1,  # a full fetch, no session
    "log_start_offset": -1,
    "leader_epoch": 0,
    "resource_type": 2,  # TOPIC
    "resource_type_filter": 1,  # ANY
    "resource_pattern_type": 3,  # LITERAL
    "pattern_type_filter": 1,  # ANY
    "iterations": 4096,
    "mechanism": 1,  # SCRAM-SHA-256
    "endpoint_type": 1,  # brokers
}
TIMEOUT_MS = 1500  # every timeout of a well-formed request: the broker answers within it
MAX_WAIT_MS = 200  # a Fetch's long poll


@dataclass(frozen=True)
class Context:
    """What the cluster holds, for names worth choosing."""

    topics: dict[str, int]  # the data topics: name -> partitions
    victim: str  # the topic DESTRUCTIVE requests name
    topic_ids: dict[str, uuid.UUID]  # every topic's, the internal ones' too
    leaders: dict[tuple[str, int], int]  # (topic, partition) -> leader, at the start
    groups: tuple[str, ...]
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class Seed:
    request: Any  # kio's request
    group: str | None  # the group it names, if any: its coordinator should be asked
    partition: tuple[str, int] | None  # the first partition it names: its leader should be


@dataclass(frozen=True)
class _Scope:
    api_key: int
    ctx: Context
    group: str
    named: dict[str, Any]  # what the request names so far ("group", "partition")
    topic: str = ""  # the topic of the struct being built, for its partitions


def well_formed(rng: random.Random, api_key: int, version: int, ctx: Context) -> Seed:
    """A kio request of that API and version, and whom it is for."""
    group = f"fuzz-join-{rng.randrange(10**9)}" if api_key in MEMBERSHIP else rng.choice(ctx.groups)
    scope = _Scope(api_key, ctx, group, {})
    request = _entity(rng, load_request_schema(api_key, version), scope)
    return Seed(request, scope.named.get("group"), scope.named.get("partition"))


def topic_for(rng: random.Random, scope: _Scope) -> str:
    if scope.api_key == CREATE_TOPICS:  # the victim again, once a DeleteTopics took it
        return scope.ctx.victim if rng.random() < 0.5 else f"fuzz-new-{rng.randrange(10**6)}"
    if scope.api_key == DESCRIBE_QUORUM:
        return "__cluster_metadata"
    if scope.api_key in DESTRUCTIVE:
        return scope.ctx.victim
    return rng.choice(sorted(scope.ctx.topics))


def _entity(rng: random.Random, entity_type: Any, scope: _Scope) -> Any:
    names = {f.name for f in fields(entity_type)}
    if _names_topic(entity_type, names):
        scope = replace(scope, topic=topic_for(rng, scope))
    values = {}
    for f in fields(entity_type):
        if get_field_tag(f) is not None:
            values[f.name] = f.default  # tagged fields stay unset (a mutation may set them)
            continue
        shape = classify_field(f)
        if isinstance(shape, EntityTupleField):
            if f.name in UNSET_ARRAYS:
                values[f.name] = None if is_optional(f) else ()
            elif is_optional(f) and rng.random() < 0.2:
                values[f.name] = None  # "all" (Metadata's topics, DescribeLogDirs', ...)
            else:
                count = 1 if rng.random() < 0.85 else 2
                values[f.name] = tuple(_entity(rng, shape.type_, scope) for _ in range(count))
        elif isinstance(shape, EntityField):
            values[f.name] = _entity(rng, shape.type_, scope)
        elif isinstance(shape, PrimitiveTupleField):
            kafka_type = f.metadata["kafka_type"]
            values[f.name] = (_value(rng, f.name, kafka_type, entity_type.__name__, scope, False),)
        else:
            values[f.name] = _value(
                rng, f.name, f.metadata["kafka_type"], entity_type.__name__, scope, is_optional(f)
            )
    return entity_type(**values)


def _names_topic(entity_type: Any, names: set[str]) -> bool:
    kind = entity_type.__name__
    if any(word in kind for word in ("Config", "Protocol", "Scram", "User")):
        return False
    return bool(names & TOPIC_NAME_FIELDS) or "topic_id" in names


def _value(
    rng: random.Random, name: str, kafka_type: str, entity: str, scope: _Scope, nullable: bool
) -> Any:
    ctx = scope.ctx
    if kafka_type == "string":
        return _text(rng, name, entity, scope, nullable)
    if kafka_type == "bool":
        return name in ("validate_only", "allow_replication_factor_change") and rng.random() < 0.5
    if kafka_type == "uuid":  # Metadata and DeleteTopics name their topics by name
        by_name = scope.api_key in (METADATA, DELETE_TOPICS)
        return None if by_name else ctx.topic_ids.get(scope.topic)
    if kafka_type == "records":
        return valid_batch(rng)
    if kafka_type == "bytes":
        return _blob(rng, name, scope)
    if kafka_type.startswith("timedelta"):
        milliseconds = {
            "max_wait": MAX_WAIT_MS,
            "session_timeout": 10_000,
            "transaction_timeout": 60_000,
            "retention_time": -1,
        }.get(name, TIMEOUT_MS)
        return datetime.timedelta(milliseconds=milliseconds)
    return _number(rng, name, entity, scope)


def _text(rng: random.Random, name: str, entity: str, scope: _Scope, nullable: bool) -> Any:
    if name in ("group_id", "groups", "groups_names", "coordinator_keys", "key"):
        scope.named.setdefault("group", scope.group)
        return scope.group
    if name in ("group_instance_id", "transactional_id", "protocol_name", "cluster_id"):
        return None
    if name in ("member_id", "committed_metadata", "rack_id"):
        return ""
    if name == "protocol_type":
        return "consumer"
    if name == "name" and "Protocol" in entity:
        return "range"
    if name == "name" and ("Scram" in entity or "User" in entity):
        return "fuzz-user"
    if name == "configuration_keys" or (name == "name" and "Config" in entity):
        return "retention.ms"
    if name == "value":
        return "86400000"
    if name in TOPIC_NAME_FIELDS or name in ("topic_names", "resource_name"):
        return scope.topic or topic_for(rng, scope)
    if name in ("principal", "principal_filter"):
        return "User:fuzz"
    if name in ("host", "host_filter"):
        return "*"
    if name == "mechanism":
        return "PLAIN"
    if name == "client_software_name":
        return "strom-kafka-fuzz"
    if name == "client_software_version":
        return "1.0"
    if name == "states_filter":
        return rng.choice(("Stable", "Empty"))
    if name == "types_filter":
        return rng.choice(("consumer", "classic"))
    if name == "reason":
        return "fuzz"
    return None if nullable else "fuzz"


def _blob(rng: random.Random, name: str, scope: _Scope) -> bytes:
    if name == "metadata":  # a ConsumerProtocolSubscription v0 of one topic, no user data
        topic = rng.choice(sorted(scope.ctx.topics)).encode()
        return struct.pack(">hih", 0, 1, len(topic)) + topic + struct.pack(">i", -1)
    if name in ("salt", "salted_password"):
        return bytes(32)
    if name == "auth_bytes":
        return b"\0fuzz\0fuzz-password"
    return b""


def _number(rng: random.Random, name: str, entity: str, scope: _Scope) -> int:
    partitions = scope.ctx.topics.get(scope.topic, 1)
    if name in ("partition", "partition_index", "index", "partitions", "partition_indexes"):
        partition = rng.randrange(partitions)
        if scope.topic:
            scope.named.setdefault("partition", (scope.topic, partition))
        return partition
    if name in ("broker_ids", "replicas"):
        return rng.choice(scope.ctx.nodes)
    if name in ANY_OF:
        return rng.choice(ANY_OF[name])
    if name == "count":  # CreatePartitions: one more
        return partitions + 1
    if name == "replica_id":  # a consumer's; OffsetForLeaderEpoch's "debug" one (-2)
        return -2 if entity == "OffsetForLeaderEpochRequest" else -1
    if name in ("operation", "permission_type"):  # READ and ALLOW; ANY in a filter
        return 3 if entity == "AclCreation" else 1
    if name in NUMBERS:
        return NUMBERS[name]
    if "epoch" in name or "generation" in name or name == "producer_id":
        return -1
    return 0
