"""Each config's type and documentation, as Kafka's ConfigDef gives them to DescribeConfigs
(v3+: config_type, and documentation when asked for): the configs of a topic and those of a
broker that metadata/config_control.py describes. The types are Kafka's ConfigDef.Type names;
the sentences are Kafka's documentation, shortened where it speaks of what Strom lacks.

A broker-wide synonym of a topic config has that config's type; its documentation names
the topic config it is the default of, as Kafka's does ("The default ... for topics")."""

from __future__ import annotations

from dataclasses import dataclass

from metadata.config_control import DYNAMIC_BROKER_CONFIGS


@dataclass(frozen=True, slots=True)
class ConfigDoc:
    type: str  # Kafka's ConfigDef.Type: BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, ...
    documentation: str


TOPIC_CONFIGS: dict[str, ConfigDoc] = {
    "cleanup.policy": ConfigDoc(
        "LIST",
        'This config designates the retention policy to use on log segments. The "delete" '
        "policy will discard old segments when their retention time or size limit has been "
        'reached. The "compact" policy will enable log compaction.',
    ),
    "compression.type": ConfigDoc(
        "STRING",
        "Specify the final compression type for a given topic. 'producer' means retain the "
        "original compression codec set by the producer.",
    ),
    "delete.retention.ms": ConfigDoc(
        "LONG",
        "The amount of time to retain delete tombstone markers for log compacted topics.",
    ),
    "flush.messages": ConfigDoc(
        "LONG",
        "The number of messages written to a log partition before a flush (fsync) is forced.",
    ),
    "flush.ms": ConfigDoc(
        "LONG", "The maximum time in ms that a message is kept in memory before it is flushed."
    ),
    "follower.replication.throttled.replicas": ConfigDoc(
        "LIST",
        "A list of replicas for which log replication should be throttled on the follower "
        "side, as partitionId:brokerId pairs, or the wildcard '*'.",
    ),
    "index.interval.bytes": ConfigDoc(
        "INT", "How frequently Kafka adds an index entry to its offset index, in bytes."
    ),
    "leader.replication.throttled.replicas": ConfigDoc(
        "LIST",
        "A list of replicas for which log replication should be throttled on the leader "
        "side, as partitionId:brokerId pairs, or the wildcard '*'.",
    ),
    "max.message.bytes": ConfigDoc(
        "INT", "The largest record batch size allowed by Kafka (after compression if enabled)."
    ),
    "message.timestamp.after.max.ms": ConfigDoc(
        "LONG",
        "The maximum allowed time difference between the message timestamp and the "
        "broker's timestamp, for a timestamp later than the broker's.",
    ),
    "message.timestamp.before.max.ms": ConfigDoc(
        "LONG",
        "The maximum allowed time difference between the broker's timestamp and the "
        "message timestamp, for a timestamp earlier than the broker's.",
    ),
    "message.timestamp.type": ConfigDoc(
        "STRING",
        "Define whether the timestamp in the message is message create time or log append "
        "time: `CreateTime` or `LogAppendTime`.",
    ),
    "min.compaction.lag.ms": ConfigDoc(
        "LONG", "The minimum time a message will remain uncompacted in the log."
    ),
    "min.insync.replicas": ConfigDoc(
        "INT",
        "When a producer sets acks to all (-1), the minimum number of replicas that must "
        "acknowledge a write for the write to be considered successful.",
    ),
    "retention.bytes": ConfigDoc(
        "LONG",
        "The maximum size a partition can grow to before old log segments are discarded; "
        "-1 for no size limit.",
    ),
    "retention.ms": ConfigDoc(
        "LONG",
        "The maximum time a log is retained before old log segments are discarded; -1 for "
        "no time limit.",
    ),
    "segment.bytes": ConfigDoc("INT", "The segment file size for the log."),
    "segment.index.bytes": ConfigDoc(
        "INT", "The size of the index that maps offsets to file positions."
    ),
    "segment.ms": ConfigDoc(
        "LONG",
        "The period of time after which Kafka forces the log to roll even if the segment "
        "file is not full.",
    ),
    "unclean.leader.election.enable": ConfigDoc(
        "BOOLEAN",
        "Indicates whether to enable replicas not in the ISR set to be elected as leader as "
        "a last resort, even though doing so may result in data loss.",
    ),
}

_BROKER_ONLY: dict[str, ConfigDoc] = {
    "num.replica.fetchers": ConfigDoc(
        "INT", "Number of fetcher threads used to replicate records from each source broker."
    ),
    "replica.fetch.max.bytes": ConfigDoc(
        "INT", "The number of bytes of messages to attempt to fetch for each partition."
    ),
    "leader.replication.throttled.rate": ConfigDoc(
        "LONG", "The replication throttle of leaders, in bytes/s (reassignments)."
    ),
    "follower.replication.throttled.rate": ConfigDoc(
        "LONG", "The replication throttle of followers, in bytes/s (reassignments)."
    ),
    "node.id": ConfigDoc("INT", "The node ID associated with the roles this process is playing."),
    "broker.id": ConfigDoc("INT", "The broker id for this server."),
    "process.roles": ConfigDoc("LIST", "The roles that this process plays: broker, controller."),
    "listeners": ConfigDoc("STRING", "Listener List: the URIs the server listens on."),
    "advertised.listeners": ConfigDoc(
        "STRING", "Listeners to publish for clients to use, if different from `listeners`."
    ),
    "controller.listener.names": ConfigDoc(
        "STRING", "A comma-separated list of the names of the listeners used by the controller."
    ),
    "inter.broker.listener.name": ConfigDoc(
        "STRING", "Name of listener used for communication between brokers."
    ),
    "controller.quorum.voters": ConfigDoc(
        "LIST", "Map of id/endpoint information for the set of voters: id@host:port, ..."
    ),
    "broker.rack": ConfigDoc("STRING", "Rack of the broker, used in rack-aware replication."),
    "log.dir": ConfigDoc("STRING", "The directory in which the log data is kept."),
    "log.dirs": ConfigDoc(
        "STRING", "The directories in which the log data is kept (log.dir if not set)."
    ),
    "metadata.log.dir": ConfigDoc(
        "STRING", "The directory in which the metadata log is kept (log.dirs if not set)."
    ),
    "log.retention.hours": ConfigDoc(
        "INT",
        "The number of hours to keep a log file before deleting it, tertiary to log.retention.ms.",
    ),
    "log.retention.minutes": ConfigDoc(
        "INT",
        "The number of minutes to keep a log file before deleting it, secondary to "
        "log.retention.ms.",
    ),
    "log.roll.hours": ConfigDoc(
        "INT", "The maximum time before a new log segment is rolled out, secondary to log.roll.ms."
    ),
    "num.partitions": ConfigDoc("INT", "The default number of log partitions per topic."),
    "default.replication.factor": ConfigDoc(
        "INT", "The replication factor for automatically created topics."
    ),
    "controller.quorum.election.timeout.ms": ConfigDoc(
        "INT", "The maximum time without a leader before an election is triggered."
    ),
    "controller.quorum.fetch.timeout.ms": ConfigDoc(
        "INT", "The maximum time without a fetch from the leader before a new election."
    ),
    "controller.quorum.election.backoff.max.ms": ConfigDoc(
        "INT", "The maximum time before a new election is started."
    ),
    "controller.quorum.request.timeout.ms": ConfigDoc(
        "INT", "How long a quorum request may wait for its response."
    ),
    "controller.quorum.append.linger.ms": ConfigDoc(
        "INT", "How long the leader waits for writes to accumulate before flushing them."
    ),
    "metadata.max.retention.bytes": ConfigDoc(
        "LONG", "The maximum combined size of the metadata log and snapshots before deletion."
    ),
    "metadata.log.max.record.bytes.between.snapshots": ConfigDoc(
        "LONG", "The bytes of metadata records between two snapshots."
    ),
    "broker.heartbeat.interval.ms": ConfigDoc(
        "INT", "The length of time in milliseconds between broker heartbeats."
    ),
    "broker.session.timeout.ms": ConfigDoc(
        "INT", "How long a broker lease lasts if no heartbeats are made."
    ),
}


def _broker_configs() -> dict[str, ConfigDoc]:
    docs = dict(_BROKER_ONLY)
    for name, spec in DYNAMIC_BROKER_CONFIGS.items():
        topic = spec.topic_synonym
        if topic is not None and name not in docs:
            docs[name] = ConfigDoc(
                TOPIC_CONFIGS[topic].type,
                f"The default {topic} of topics that set none: "
                + TOPIC_CONFIGS[topic].documentation,
            )
    return docs


BROKER_CONFIGS: dict[str, ConfigDoc] = _broker_configs()
