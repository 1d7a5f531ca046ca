"""Dynamic configs as the controller runs them: IncrementalAlterConfigs (KIP-339) and
DescribeConfigs, as pure functions over a MetadataImage.

`incremental_alter_configs` returns the ConfigRecords to write and a result per resource and
changes nothing (the records change the image once committed and replayed), like
topic_control. The checks are those Kafka makes along the way, on the forwarding broker
(ConfigAdminManager.preprocess: duplicate keys, null values, broker configs) and on the
controller (ControllerConfigurationValidator: resource names and topic configs;
ConfigurationControlManager: the ops; the existence checker: topic or broker known), with
Kafka's error names and messages. A resource that fails gets its error and no records; the
others go ahead.

`describe_configs` shows every config of a topic or broker with its effective value and
where it comes from (Kafka's ConfigSource), resolving a topic config as Kafka's brokers do:
the topic's own value, else its broker-wide synonym (log.retention.ms for retention.ms) from
the answering broker's dynamic config, the cluster-wide dynamic default, the broker's static
server.properties, and last Kafka's default.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from google.protobuf.message import Message

from metadata.errors import ApiError
from metadata.image import ConfigResource, MetadataImage
from metadata.topic_configs import REPLICATION_CONFIGS, validate_topic_configs
from storage.config import BROKER_SYNONYMS, INT_MAX, LONG_MAX, UNIT_SYNONYMS, LogConfig
from storage.errors import InvalidTopicError
from storage.names import validate_topic
from strom_api.error_codes import ErrorCode
from strom_api.v1 import metadata_pb2 as pb


class OpType(IntEnum):
    """Kafka's AlterConfigOp.OpType, with its wire ids."""

    SET = 0
    DELETE = 1
    APPEND = 2  # list-valued configs only
    SUBTRACT = 3  # list-valued configs only


class ConfigSource(StrEnum):
    """Kafka's DescribeConfigs ConfigSource names (the ones a topic or broker config has)."""

    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


# One change to one key: (name, op, value); the value is ignored (and may be None) for DELETE.
# The op is the wire's int until checked: an unknown one is INVALID_REQUEST for its resource.
ConfigOp = tuple[str, OpType | int, str | None]


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of DescribeConfigs. `value` is None where Kafka shows null (a broker key with
    no default, e.g. log.retention.ms, which log.retention.hours stands in for). `synonyms`
    are every place the value could come from that is set, highest precedence first."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """A broker config that may be changed at runtime. A `topic_synonym` config is the
    default of that topic config and is checked as it is; others carry their own check."""

    default: str | None  # Kafka's default; None where Kafka has none
    topic_synonym: str | None = None
    check: Callable[[str], bool] | None = None
    wanted: str = ""


def _int_in(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= high
        except ValueError:
            return False

    return check


_TOPIC_DEFAULTS: dict[str, str] = {
    **LogConfig().to_properties(),
    **{name: spec[0] for name, spec in REPLICATION_CONFIGS.items()},
}

# Topic config -> its broker-wide synonym: storage's log.* names, plus the replication
# configs (three keep their name at broker level, the timestamp ones gain a "log." prefix).
_TOPIC_TO_BROKER: dict[str, str] = {
    **{topic: broker for broker, topic in BROKER_SYNONYMS.items()},
    **{n: n for n in ("min.insync.replicas", "unclean.leader.election.enable", "compression.type")},
    **{n: "log." + n for n in REPLICATION_CONFIGS if n.startswith("message.timestamp.")},
}

# Kafka's broker defaults where they differ from the topic default they feed: Kafka gives
# log.retention.ms and log.roll.ms no default (log.retention.hours=168 and log.roll.hours=168
# decide) and log.flush.interval.ms none (log.flush.scheduler.interval.ms decides).
_NO_BROKER_DEFAULT = ("log.retention.ms", "log.roll.ms", "log.flush.interval.ms")

# The broker configs IncrementalAlterConfigs accepts (Kafka's DynamicBrokerConfig keeps a
# longer list: SSL, SASL, listeners, thread pools, quotas; Strom honours these): every
# broker-wide synonym of a topic config, which Kafka makes dynamic (DynamicLogConfig), and
# two replication settings. replica.fetch.max.bytes is read-only in Kafka (KIP-576 proposes
# making it dynamic); Strom takes it at runtime, so its replica fetchers must read it per
# fetch rather than once at startup.
DYNAMIC_BROKER_CONFIGS: dict[str, BrokerConfig] = {
    **{
        broker: BrokerConfig(
            None if broker in _NO_BROKER_DEFAULT else _TOPIC_DEFAULTS[topic], topic_synonym=topic
        )
        for topic, broker in _TOPIC_TO_BROKER.items()
    },
    "num.replica.fetchers": BrokerConfig("1", check=_int_in(1, INT_MAX), wanted="an int >= 1"),
    "replica.fetch.max.bytes": BrokerConfig(
        "1048576", check=_int_in(0, INT_MAX), wanted="an int >= 0"
    ),
    # The replication throttle of a reassignment (kafka-reassign-partitions.sh --throttle):
    # bytes/s for the replicas named in the topics' *.replication.throttled.replicas.
    "leader.replication.throttled.rate": BrokerConfig(
        str(LONG_MAX), check=_int_in(0, LONG_MAX), wanted="a long >= 0"
    ),
    "follower.replication.throttled.rate": BrokerConfig(
        str(LONG_MAX), check=_int_in(0, LONG_MAX), wanted="a long >= 0"
    ),
}

# Broker configs Strom knows that are read only at startup (server/server_config.py reads
# them; Kafka's defaults), so that setting one at runtime gets Kafka's "cannot be updated
# dynamically" and not "unknown".
# The coarser retention and roll units are among them: Kafka makes only the .ms forms
# dynamic.
STATIC_BROKER_CONFIGS: dict[str, str | None] = {
    "node.id": "-1",
    "broker.id": "-1",
    "process.roles": "",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": None,
    "controller.listener.names": None,
    "inter.broker.listener.name": None,
    "controller.quorum.voters": "",
    "broker.rack": None,
    "log.dir": "/tmp/kafka-logs",
    "log.dirs": None,
    "metadata.log.dir": None,
    "log.retention.hours": "168",
    "log.retention.minutes": None,
    "log.roll.hours": "168",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.append.linger.ms": "25",
    "metadata.max.retention.bytes": "104857600",
    "metadata.log.max.record.bytes.between.snapshots": "20971520",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}

# The configs of Kafka's ConfigDef.Type.LIST, the only ones APPEND and SUBTRACT apply to.
_LIST_CONFIGS: dict[int, set[str]] = {
    pb.TOPIC: {"cleanup.policy"},
    pb.BROKER: {"log.cleanup.policy"},
}


def _broker_default(name: str) -> str | None:
    spec = DYNAMIC_BROKER_CONFIGS.get(name)
    return spec.default if spec is not None else STATIC_BROKER_CONFIGS.get(name)


_BROKER_DEFAULTS = {
    k: v
    for k in DYNAMIC_BROKER_CONFIGS.keys() | STATIC_BROKER_CONFIGS.keys()
    if (v := _broker_default(k)) is not None
}


# ---------------------------------------------------------------------------------------
# IncrementalAlterConfigs


def incremental_alter_configs(
    image: MetadataImage,
    changes: Mapping[ConfigResource, Sequence[ConfigOp]]
    | Iterable[tuple[ConfigResource, Sequence[ConfigOp]]],
    validate_only: bool = False,
    replace: bool = False,
) -> tuple[list[Message], dict[ConfigResource, ApiError | None]]:
    """The ConfigRecords that make `changes` (a mapping, or pairs in request order, so that
    a resource named twice can be told) and each resource's result; with `validate_only`
    the same results and no records. With `replace` (Kafka's legacy AlterConfigs, whose
    ConfigurationControlManager.legacyAlterConfigs does the same) every config of the
    resource that no op names is deleted, so its configs become exactly the ones set."""
    pairs = list(changes.items()) if isinstance(changes, Mapping) else list(changes)
    counts = Counter(resource for resource, _ in pairs)
    records: list[Message] = []
    results: dict[ConfigResource, ApiError | None] = {}
    for resource, ops in pairs:
        if counts[resource] > 1:
            results[resource] = ApiError(
                ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
            )
            continue
        if replace:
            named = {key for key, _, _ in ops}
            current = image.configs.of(*resource)
            ops = [*ops, *((key, OpType.DELETE, None) for key in current if key not in named)]
        try:
            records += _alter_one(image, resource, ops)
        except ApiError as error:
            results[resource] = error
            continue
        results[resource] = None
    return ([] if validate_only else records), results


def _alter_one(
    image: MetadataImage, resource: ConfigResource, ops: Sequence[ConfigOp]
) -> list[Message]:
    resource_type, name = resource
    keys = [key for key, _, _ in ops]
    if len(set(keys)) != len(keys):
        raise ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for _, op, _ in ops:
        try:
            OpType(op)
        except ValueError:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}") from None
    nulls = [key for key, op, value in ops if op != OpType.DELETE and value is None]
    if nulls:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )

    broker_id = None
    if resource_type == pb.TOPIC:
        _check_topic_name(name)
    elif resource_type == pb.BROKER:
        broker_id = _parse_broker_id(name)
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")

    current = image.configs.of(resource_type, name)
    updated = dict(current)
    records: list[Message] = []
    for key, op, value in ops:
        new = _apply(resource_type, key, OpType(op), value, current.get(key))
        if new is None:
            updated.pop(key, None)
        else:
            updated[key] = new
        # Kafka writes a broker key even when unchanged, so that brokers reload it
        # (KAFKA-14136); a topic key only when it changes.
        if new != current.get(key) or resource_type == pb.BROKER:
            record = pb.ConfigRecord(
                resource_type=pb.ConfigResourceType.Name(resource_type),
                resource_name=name,
                name=key,
            )
            if new is not None:
                record.value = new
            records.append(record)

    # Kafka validates the resulting set of the resource's configs, then checks that the
    # resource exists (so a bad config on a missing topic is INVALID_CONFIG).
    if resource_type == pb.TOPIC:
        validate_topic_configs(updated)
        if name not in image.topics.by_name:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
    else:
        _validate_broker_configs(updated)
        # Kafka also takes a controller's node id here; the image holds brokers only.
        if broker_id is not None and broker_id not in image.cluster.brokers:
            raise ApiError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {broker_id} found."
            )
    return records


def _check_topic_name(name: str) -> None:
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    try:
        validate_topic(name, 0)
    except InvalidTopicError as exc:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None


def _parse_broker_id(name: str) -> int | None:
    """None for the cluster default (""), else the broker id. Kafka's Integer.valueOf takes
    "03" and "+3" too, but then stores configs under a name no broker reads (brokers look up
    "3"); only the canonical form is taken here."""
    if not name:
        return None
    if not re.fullmatch(r"-?(0|[1-9][0-9]*)", name) or not -(2**31) <= int(name) <= INT_MAX:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."
        )
    broker_id = int(name)
    if broker_id < 0:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
    return broker_id


def _apply(
    resource_type: int, key: str, op: OpType, value: str | None, current: str | None
) -> str | None:
    """The key's value after `op` (None: deleted), as ConfigurationControlManager computes it."""
    if op == OpType.SET:
        return value
    if op == OpType.DELETE:
        return None
    assert value is not None  # null values were refused above
    if key not in _LIST_CONFIGS[resource_type]:
        if resource_type == pb.BROKER:
            # Refused on the forwarding broker (ConfigAdminManager.prepareIncrementalConfigs).
            if key not in DYNAMIC_BROKER_CONFIGS and key not in STATIC_BROKER_CONFIGS:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config '{key}'")
            verb = "append" if op == OpType.APPEND else "subtract"
            raise ApiError(
                ErrorCode.INVALID_CONFIG,
                f"Config value {verb} is not allowed for config key: {key}",
            )
        raise ApiError(
            ErrorCode.INVALID_CONFIG, f"Can't {op.name} to key {key} because its type is not LIST."
        )
    # With no value of its own the resource starts from Kafka's schema default ("delete"),
    # not from the broker-wide value: Kafka does the same.
    if current is None:
        current = _TOPIC_DEFAULTS[key] if resource_type == pb.TOPIC else _broker_default(key)
    parts = [p for p in (current or "").split(",") if p]
    for item in value.split(","):
        if op == OpType.APPEND and item not in parts:
            parts.append(item)
        elif op == OpType.SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def _validate_broker_configs(configs: Mapping[str, str]) -> None:
    static = sorted(key for key in configs if key in STATIC_BROKER_CONFIGS)
    if static:
        # Kafka's DynamicBrokerConfig message, a Scala Set included; Kafka answers
        # INVALID_REQUEST for it (its validation errors become InvalidRequestException).
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: Set({', '.join(static)})",
        )
    for key, value in configs.items():
        spec = DYNAMIC_BROKER_CONFIGS.get(key)
        if spec is None:
            # Kafka accepts unknown broker keys (plugins may read them); Strom has no plugins,
            # so an unknown key is a typo that would otherwise be kept silently.
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config '{key}'")
        _check_broker_value(key, spec, value)


def _check_broker_value(key: str, spec: BrokerConfig, value: str) -> None:
    """INVALID_CONFIG naming the broker key and value. (Kafka answers INVALID_REQUEST for a
    bad broker value and calls that wrong in KAFKA-13609; INVALID_CONFIG is what it answers
    for the same value on a topic.)"""
    if spec.topic_synonym is not None:
        try:
            validate_topic_configs({spec.topic_synonym: value})
        except ApiError as exc:
            # The topic check names the topic key; keep its rule, name the key that was set.
            wanted = exc.message.rpartition(": ")[2]
            raise ApiError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: {wanted}"
            ) from None
    elif spec.check is not None and not spec.check(value):
        raise ApiError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {value} for configuration {key}: {spec.wanted}",
        )


# ---------------------------------------------------------------------------------------
# DescribeConfigs


def describe_configs(
    image: MetadataImage,
    resource: ConfigResource,
    static_broker_config: Mapping[str, str] | None = None,
    keys: Iterable[str] | None = None,
    *,
    broker_id: int | None = None,
) -> list[ConfigEntry]:
    """The configs of `resource` sorted by name, only `keys` if given (unknown ones are left
    out, as Kafka does). `static_broker_config` is the answering broker's server.properties
    and `broker_id` its id (its per-broker dynamic configs apply to a topic's values)."""
    resource_type, name = resource
    static = static_broker_config or {}
    if resource_type == pb.TOPIC:
        if name not in image.topics.by_name:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        entries = _describe_topic(image, name, static, broker_id)
    elif resource_type == pb.BROKER:
        entries = _describe_broker(image, name, static)
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")
    wanted = None if keys is None else set(keys)
    return [e for e in entries if wanted is None or e.name in wanted]


def _broker_layers(
    image: MetadataImage, static: Mapping[str, str], broker_id: int | None
) -> list[tuple[Mapping[str, str], ConfigSource]]:
    """Where a broker-level value comes from, highest precedence first."""
    per_broker = {} if broker_id is None else image.configs.of(pb.BROKER, str(broker_id))
    return [
        (per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (image.configs.of(pb.BROKER, ""), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, ConfigSource.STATIC_BROKER_CONFIG),
        (_BROKER_DEFAULTS, ConfigSource.DEFAULT_CONFIG),
    ]


def _describe_topic(
    image: MetadataImage, topic: str, static: Mapping[str, str], broker_id: int | None
) -> list[ConfigEntry]:
    own = image.configs.of(pb.TOPIC, topic)
    layers = _broker_layers(image, static, broker_id)
    return [_topic_entry(name, own, layers) for name in sorted(_TOPIC_DEFAULTS)]


def _topic_entry(
    name: str,
    own: Mapping[str, str],
    layers: Sequence[tuple[Mapping[str, str], ConfigSource]],
) -> ConfigEntry:
    """One topic config: the topic's `own` value, else the first broker layer setting it."""
    # The broker names that set this config, finest unit first (retention.ms <-
    # log.retention.ms, log.retention.minutes, log.retention.hours), with their factor.
    forms: Sequence[tuple[str, int]] = UNIT_SYNONYMS.get(name, ())
    if not forms and name in _TOPIC_TO_BROKER:
        forms = ((_TOPIC_TO_BROKER[name], 1),)
    synonyms: list[ConfigSynonym] = []
    factors: list[int] = []
    if name in own:
        synonyms.append(ConfigSynonym(name, own[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        factors.append(1)
    # Layer first, then unit: Kafka lists synonyms so; the coarser units being static
    # only, the first of them is also the value Kafka's broker takes.
    for layer, source in layers:
        for broker_name, factor in forms:
            if broker_name in layer:
                synonyms.append(ConfigSynonym(broker_name, layer[broker_name], source))
                factors.append(factor)
    if synonyms:
        value = _in_topic_units(synonyms[0], factors[0])
        source = synonyms[0].source
    else:
        value, source = _TOPIC_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG
    if name in _LIST_CONFIGS[pb.TOPIC]:
        value = ",".join(p.strip() for p in value.split(",") if p.strip())
    return ConfigEntry(name, value, source, read_only=False, synonyms=tuple(synonyms))


def _in_topic_units(synonym: ConfigSynonym, factor: int) -> str:
    assert synonym.value is not None
    if factor == 1:
        return synonym.value
    try:
        amount = int(synonym.value)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {synonym.value} for configuration {synonym.name}: expected a long",
        ) from None
    return "-1" if amount < 0 else str(min(amount * factor, LONG_MAX))  # negative: unlimited


def _describe_broker(
    image: MetadataImage, name: str, static: Mapping[str, str]
) -> list[ConfigEntry]:
    if not name:
        # The cluster default resource shows only what is set in it (Kafka does the same).
        return [
            ConfigEntry(
                key,
                value,
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                read_only=key not in DYNAMIC_BROKER_CONFIGS,
                synonyms=(ConfigSynonym(key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),),
            )
            for key, value in sorted(image.configs.of(pb.BROKER, "").items())
        ]
    try:
        broker_id = int(name)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    layers = _broker_layers(image, static, broker_id)
    # Every config Strom knows, set or not (Kafka lists them all), and whatever else is set.
    names = DYNAMIC_BROKER_CONFIGS.keys() | STATIC_BROKER_CONFIGS.keys()
    names |= {key for layer, _ in layers for key in layer}
    entries = []
    for key in sorted(names):
        synonyms = tuple(
            ConfigSynonym(key, layer[key], source) for layer, source in layers if key in layer
        )
        entries.append(
            ConfigEntry(
                key,
                synonyms[0].value if synonyms else None,
                synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=key not in DYNAMIC_BROKER_CONFIGS,
                synonyms=synonyms,
            )
        )
    return entries


def new_topic_configs(
    image: MetadataImage, configs: Mapping[str, str], local: LocalConfig
) -> list[ConfigEntry]:
    """The configs a topic created with `configs` has, as DescribeConfigs will show them on
    `local`'s node (Kafka's CreateTopics v5+ answer, its computeEffectiveTopicConfigs)."""
    layers = _broker_layers(image, local.static, local.node_id)
    return [_topic_entry(name, configs, layers) for name in sorted(_TOPIC_DEFAULTS)]


def effective_topic_configs(
    image: MetadataImage, topic: str, static_broker_config: Mapping[str, str], broker_id: int
) -> dict[str, str]:
    """Every config of `topic` as broker `broker_id` applies it: the topic's own value, else
    the broker's dynamic, cluster-default dynamic or static value, else Kafka's default (the
    same answer DescribeConfigs gives)."""
    entries = _describe_topic(image, topic, static_broker_config, broker_id)
    return {e.name: e.value for e in entries if e.value is not None}


@dataclass(frozen=True, slots=True)
class LocalConfig:
    """What a topic config's effective value takes from the node that reads it: the node's
    id, whose per-broker dynamic configs apply, and its static server.properties. Kafka's
    controller holds the same two (ConfigurationControlManager's nodeId and staticConfig),
    so that its min.insync.replicas and unclean.leader.election.enable are the brokers'."""

    node_id: int | None = None
    static: Mapping[str, str] = field(default_factory=dict)


NO_LOCAL_CONFIG = LocalConfig()


def effective_topic_config(
    image: MetadataImage, topic: str, name: str, local: LocalConfig = NO_LOCAL_CONFIG
) -> str:
    """One config of `topic` as `local`'s node applies it (Kafka's
    ConfigurationControlManager.getTopicConfig): the topic's own value, else the node's
    dynamic, cluster-default dynamic or static value of its broker-wide synonym, else
    Kafka's default. `name` must be a topic config."""
    own = image.configs.of(pb.TOPIC, topic)
    value = _topic_entry(name, own, _broker_layers(image, local.static, local.node_id)).value
    assert value is not None  # every topic config has a default
    return value
