"""server.properties: a node's configuration, with Kafka's names, file format and checks.

    process.roles=broker,controller
    node.id=1
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097
    listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
    controller.listener.names=CONTROLLER
    log.dirs=/var/lib/strom/data

The file is Java properties (`key=value` or `key: value`, `#`/`!` comments). Environment
variables `STROM_<KEY>` win over it (the key lower-cased, `_` read as `.`: STROM_NODE_ID is
node.id, STROM_CONTROLLER_QUORUM_VOTERS is controller.quorum.voters; containers set per-pod
values this way, deploy/README.md), and `--override key=value` wins over both. A missing
required key or a bad value is an InvalidConfigError naming it. Keys this node does not know
are reported (as Kafka warns "supplied but isn't a known config") and ignored. The Raft and
controller settings go to RaftConfig and ControllerConfig under their Kafka names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from broker.replica_config import ReplicaConfig
from coordinator.group.config import GroupConfig
from metadata.authorizer import (
    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
    SUPER_USERS_CONFIG,
    AuthorizerSettings,
)
from metadata.config_control import DYNAMIC_BROKER_CONFIGS, STATIC_BROKER_CONFIGS
from metadata.controller import ControllerConfig
from raft.config import InvalidRaftConfigError, RaftConfig
from server.listener_sasl import ListenerSasl, is_sasl_key, listener_sasl
from server.listener_security import (
    SSL_KEYS,
    TLS_PROTOCOLS,
    ListenerTls,
    is_security_key,
    listener_protocols,
    listener_tls,
)
from server.listeners import (
    Listener,
    broker_listeners,
    check_controller_listeners,
    check_controller_only,
    kafka_listener_names,
    parse_listeners,
)
from server.unapplied_configs import NOT_APPLIED
from storage.errors import InvalidConfigError

_RAFT_KEYS = {
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.append.linger.ms",
    "metadata.max.retention.bytes",
}
_CONTROLLER_KEYS = {
    "broker.heartbeat.interval.ms": "heartbeat_interval_ms",
    "broker.session.timeout.ms": "session_timeout_ms",
    "num.partitions": "num_partitions",
    "default.replication.factor": "default_replication_factor",
    "metadata.log.max.record.bytes.between.snapshots": "max_bytes_between_snapshots",
    "leader.imbalance.per.broker.percentage": "leader_imbalance_percentage",
    "max.partitions": "max_partitions",
    "max.broker.partitions": "max_broker_partitions",
    "unclean.leader.election.interval.ms": "unclean_leader_election_interval_ms",
}
_NODE_KEYS = {
    "process.roles",
    "node.id",
    "controller.quorum.voters",
    "listeners",
    "advertised.listeners",
    "controller.listener.names",
    "kafka.listener.names",
    "inter.broker.listener.name",
    "log.dirs",
    "log.dir",
    "metadata.log.dir",
    "broker.rack",
    "listener.security.protocol.map",
    "authorizer.class.name",
    SUPER_USERS_CONFIG,
    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
    *SSL_KEYS,  # server/listener_security.py; each also as listener.name.<name>.<key>
}


# The data plane's settings, Kafka's names and defaults.
_REPLICA_KEYS = {
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "replica.fetch.wait.max.ms": "fetch_wait_max_ms",
    "replica.fetch.min.bytes": "fetch_min_bytes",
    "replica.fetch.max.bytes": "fetch_max_bytes",
    "replica.fetch.response.max.bytes": "fetch_response_max_bytes",
    "replica.fetch.backoff.ms": "fetch_backoff_ms",
    "num.replica.fetchers": "num_fetchers",
    "replica.high.watermark.checkpoint.interval.ms": "checkpoint_interval_ms",
    "log.flush.scheduler.interval.ms": "flush_scheduler_interval_ms",
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "producer.id.expiration.check.interval.ms": "producer_id_expiration_check_interval_ms",
    "socket.request.max.bytes": "socket_request_max_bytes",
    "queued.max.requests": "queued_max_requests",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "fetch.max.bytes": "fetch_response_limit",
    "max.incremental.fetch.session.cache.slots": "max_incremental_fetch_session_cache_slots",
    "min.incremental.fetch.session.eviction.ms": "min_incremental_fetch_session_eviction_ms",
    # Dynamic too (broker/replication_settings.py): these are the values under the dynamic ones.
    "leader.replication.throttled.rate": "leader_replication_throttled_rate",
    "follower.replication.throttled.rate": "follower_replication_throttled_rate",
}


_LOWEST = {
    "num.replica.fetchers": 1,
    "socket.request.max.bytes": 1,
    "queued.max.requests": 1,
    "queued.max.request.bytes": 1,  # or -1, unbounded
    "fetch.max.bytes": 1024,  # Kafka's lower bound
    "producer.id.expiration.check.interval.ms": 1,
}


# The group coordinator's settings (coordinator/group/config.py), by Kafka's names.
_GROUP_KEYS = {
    "offsets.topic.num.partitions": "offsets_topic_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
}


# authorizer.class.name: Kafka's class of the KRaft authorizer, and the short name Strom
# also takes for it. Empty (the default) is no authorizer: every request is allowed, as
# Kafka allows everything without one.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_AUTHORIZERS = (STANDARD_AUTHORIZER, "StandardAuthorizer")


def _authorizer(props: Mapping[str, str]) -> AuthorizerSettings | None:
    """The authorizer's settings (super.users, allow.everyone.if.no.acl.found) when
    authorizer.class.name names the StandardAuthorizer, None when it is empty."""
    name = props.get("authorizer.class.name", "").strip()
    if not name:
        return None
    if name not in _AUTHORIZERS:
        raise InvalidConfigError(
            f"invalid value '{name}' for config 'authorizer.class.name': Strom's authorizer "
            f"is {STANDARD_AUTHORIZER} (or StandardAuthorizer); leave it empty for none"
        )
    return AuthorizerSettings.from_properties(props)


@dataclass(frozen=True)
class ServerConfig:
    node_id: int
    roles: frozenset[str]
    voters: Mapping[int, str]  # node id -> host:port of its CONTROLLER listener
    listeners: Mapping[str, Listener]  # every one is bound (server/listeners.py)
    controller_listener: str
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    rack: str | None = None
    # What the broker registers: advertised.listeners, else its listeners.
    advertised_listeners: tuple[Listener, ...] = ()
    raft: RaftConfig = field(default_factory=RaftConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    replica: ReplicaConfig = field(default_factory=ReplicaConfig)
    groups: GroupConfig = field(default_factory=GroupConfig)
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9404  # -1: no metrics listener
    unknown: tuple[str, ...] = ()  # keys given that no part of the node reads
    not_applied: tuple[str, ...] = ()  # Kafka keys given that Strom knows and ignores
    properties: Mapping[str, str] = field(default_factory=dict)  # as given (DescribeConfigs)
    # Listener name -> PLAINTEXT or SSL, for every listener bound and the controller
    # listener name (which a broker-only node dials); TLS settings of the SSL ones.
    protocols: Mapping[str, str] = field(default_factory=dict)
    tls: Mapping[str, ListenerTls] = field(default_factory=dict)
    sasl: Mapping[str, ListenerSasl] = field(default_factory=dict)  # the SASL_* listeners
    # authorizer.class.name set: the StandardAuthorizer's settings; None: no authorizer.
    authorizer: AuthorizerSettings | None = None
    # kafka.listener.names: the broker listeners speaking Kafka's protocol (server/kafka/).
    kafka_listeners: frozenset[str] = frozenset()

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def broker_listeners(self) -> list[Listener]:
        return [x for n, x in self.listeners.items() if n != self.controller_listener]


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the parts server.properties files use: comments, `=` or `:`,
    surrounding blanks, and lines continued with a trailing backslash."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            out[line] = ""
        else:
            out[match.group(1)] = match.group(2).strip()
    return out


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidConfigError(f"--override expects key=value, got '{item}'")
        out[key.strip()] = value.strip()
    return out


ENV_PREFIX = "STROM_"


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The config keys set by STROM_<KEY> variables: STROM_NODE_ID=3 is node.id=3."""
    return {
        name[len(ENV_PREFIX) :].lower().replace("_", "."): value.strip()
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)
    }


def load(
    path: str, overrides: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> ServerConfig:
    """The file, then STROM_<KEY> variables of `environ` (default: the process's), then
    `overrides`."""
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except OSError as exc:
        raise InvalidConfigError(f"cannot read {path}: {exc.strerror}") from None
    props.update(env_overrides(os.environ if environ is None else environ))
    props.update(parse_overrides(overrides))
    return from_properties(props)


def _require(props: Mapping[str, str], key: str) -> str:
    value = props.get(key, "").strip()
    if not value:
        raise InvalidConfigError(f"missing required config '{key}'")
    return value


def _int(props: Mapping[str, str], key: str) -> int:
    value = _require(props, key)
    try:
        return int(value)
    except ValueError:
        raise InvalidConfigError(
            f"invalid value '{value}' for config '{key}': expected an int"
        ) from None


def _bool(props: Mapping[str, str], key: str, default: bool = False) -> bool:
    if key not in props:
        return default
    flag = props[key].strip().lower()
    if flag not in ("true", "false"):
        raise InvalidConfigError(
            f"invalid value '{flag}' for config '{key}': expected true or false"
        )
    return flag == "true"


def _node_id(props: Mapping[str, str]) -> int:
    """node.id, with Kafka's synonym broker.id: either names the node, and both must agree
    (KafkaConfig.populateSynonyms and its "same value" check)."""
    if "node.id" not in props and props.get("broker.id", "").strip():
        return _int(props, "broker.id")
    node_id = _int(props, "node.id")
    if props.get("broker.id", "").strip() and _int(props, "broker.id") != node_id:
        raise InvalidConfigError(
            f"broker.id {props['broker.id'].strip()} differs from node.id {node_id}: you must "
            "set node.id to the same value as broker.id"
        )
    return node_id


def parse_voters(text: str) -> dict[int, str]:
    voters = {}
    for item in text.split(","):
        node, at, address = item.strip().partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not node.isdigit() or not port.isdigit() or not host:
            raise InvalidConfigError(
                f"invalid value '{text}' for config 'controller.quorum.voters': expected "
                "id@host:port,..."
            )
        voters[int(node)] = address
    return voters


def from_properties(props: Mapping[str, str]) -> ServerConfig:
    roles = frozenset(r.strip() for r in _require(props, "process.roles").split(","))
    if not roles or not roles <= {"broker", "controller"}:
        raise InvalidConfigError(
            f"invalid value '{props['process.roles']}' for config 'process.roles': expected "
            "broker, controller or broker,controller"
        )
    node_id = _node_id(props)
    voters = parse_voters(_require(props, "controller.quorum.voters"))
    listeners = parse_listeners(_require(props, "listeners"), "listeners")
    controller_names = [
        n.strip() for n in _require(props, "controller.listener.names").split(",") if n.strip()
    ]
    controller_listener = controller_names[0] if controller_names else ""
    check_controller_listeners(roles, listeners, controller_names)
    kafka_names = kafka_listener_names(props, listeners, controller_names)
    if "controller" in roles:
        if controller_listener not in listeners:
            raise InvalidConfigError(
                f"controller.listener.names names '{controller_listener}', which is not in "
                "'listeners'"
            )
        if node_id not in voters:
            raise InvalidConfigError(
                f"node.id {node_id} has the controller role but is not in controller.quorum.voters"
            )
    if "broker" in roles and not [n for n in listeners if n != controller_listener]:
        raise InvalidConfigError(
            "the broker role needs a listener for clients besides the controller's "
            f"'{controller_listener}' in 'listeners', e.g. PLAINTEXT://host:9092"
        )
    if "broker" in roles:
        broker = broker_listeners(props, listeners, controller_listener, kafka_names)
        advertised, inter_broker = broker.advertised, broker.inter_broker
    else:
        check_controller_only(listeners, controller_listener)
        advertised, inter_broker = (), ""
    used = dict.fromkeys([*listeners, *([controller_listener] if controller_listener else [])])
    protocols = listener_protocols(props, used, controller_names)
    tls = {n: listener_tls(props, n, p) for n, p in protocols.items() if p in TLS_PROTOCOLS}
    dialled = {inter_broker: "inter.broker", controller_listener: "controller"}
    sasl = {
        n: listener_sasl(props, n, dialled.get(n))
        for n, p in protocols.items()
        if p.startswith("SASL_")
    }
    authorizer = _authorizer(props)
    log_dirs_text = props.get("log.dirs") or props.get("log.dir") or ""
    log_dirs = tuple(d.strip() for d in log_dirs_text.split(",") if d.strip())
    if not log_dirs:
        raise InvalidConfigError("missing required config 'log.dirs'")
    raft_props = {k: v for k, v in props.items() if k in _RAFT_KEYS}
    try:
        raft = RaftConfig.from_properties(raft_props)
    except InvalidRaftConfigError as exc:
        raise InvalidConfigError(str(exc)) from None
    controller_values: dict[str, int | bool] = {}
    for key, attr in _CONTROLLER_KEYS.items():
        if key in props:
            controller_values[attr] = _int(props, key)
    for key in ("max.partitions", "max.broker.partitions", "unclean.leader.election.interval.ms"):
        if key in props and _int(props, key) < 1:
            raise InvalidConfigError(
                f"invalid value '{props[key]}' for config '{key}': must be >= 1"
            )
    if "leader.imbalance.check.interval.seconds" in props:
        seconds = _int(props, "leader.imbalance.check.interval.seconds")
        controller_values["leader_imbalance_check_interval_ms"] = seconds * 1000
    if "auto.leader.rebalance.enable" in props:
        controller_values["auto_leader_rebalance"] = _bool(props, "auto.leader.rebalance.enable")
    replica_values: dict[str, int | bool | str] = {}
    for key, attr in _REPLICA_KEYS.items():
        if key in props:
            value = _int(props, key)
            lowest = _LOWEST.get(key, 0)
            if value < lowest and not (key == "queued.max.request.bytes" and value == -1):
                raise InvalidConfigError(
                    f"invalid value '{props[key]}' for config '{key}': expected an int >= {lowest}"
                )
            replica_values[attr] = value
    replica_values["auto_create_topics"] = _bool(props, "auto.create.topics.enable", True)
    replica_values["inter_broker_listener"] = inter_broker
    group_values: dict[str, int] = {}
    for key, attr in _GROUP_KEYS.items():
        if key in props:
            value = _int(props, key)
            lowest = 0 if key.endswith("delay.ms") else 1
            if value < lowest:
                raise InvalidConfigError(
                    f"invalid value '{props[key]}' for config '{key}': expected an int >= {lowest}"
                )
            group_values[attr] = value
    known = _NODE_KEYS | _RAFT_KEYS | set(_CONTROLLER_KEYS) | set(_REPLICA_KEYS) | set(_GROUP_KEYS)
    known |= {"auto.create.topics.enable", "prometheus.metrics.host", "prometheus.metrics.port"}
    metrics_port = (
        _int(props, "prometheus.metrics.port") if "prometheus.metrics.port" in props else 9404
    )
    if not -1 <= metrics_port <= 65535:
        raise InvalidConfigError(
            f"invalid value '{metrics_port}' for config 'prometheus.metrics.port': expected a "
            "port, 0 for any free one, or -1 for none"
        )
    # Broker-wide defaults of topic configs (log.retention.ms, min.insync.replicas, ...)
    # are read where topics' configs are computed (broker/topic_settings.py).
    known |= set(DYNAMIC_BROKER_CONFIGS) | set(STATIC_BROKER_CONFIGS)
    known |= {"leader.imbalance.check.interval.seconds", "auto.leader.rebalance.enable"}
    return ServerConfig(
        node_id=node_id,
        roles=roles,
        voters=voters,
        listeners=listeners,
        controller_listener=controller_listener,
        log_dirs=log_dirs,
        metadata_log_dir=props.get("metadata.log.dir", "").strip() or log_dirs[0],
        rack=props.get("broker.rack") or None,
        advertised_listeners=advertised,
        raft=raft,
        controller=ControllerConfig(**controller_values),  # type: ignore[arg-type]
        replica=ReplicaConfig(**replica_values),  # type: ignore[arg-type]
        groups=GroupConfig(**group_values),
        metrics_host=props.get("prometheus.metrics.host", "0.0.0.0").strip() or "0.0.0.0",
        metrics_port=metrics_port,
        unknown=tuple(
            sorted(
                k
                for k in props
                if k not in known
                and k not in NOT_APPLIED
                and not is_security_key(k)
                and not is_sasl_key(k)
            )
        ),
        not_applied=tuple(sorted(k for k in props if k in NOT_APPLIED)),
        properties=dict(props),
        protocols=protocols,
        tls=tls,
        sasl=sasl,
        authorizer=authorizer,
        kafka_listeners=kafka_names,
    )
