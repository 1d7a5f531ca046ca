"""The APIs and versions this listener serves: one table, which ApiVersions advertises and
the dispatcher (handlers.py) serves, so a client is never offered what is not implemented.
Ranges from docs/kafka_protocol.md ("Strom serves"). An API added here needs its handler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiRange:
    key: int
    name: str  # Kafka's, as in request metrics (kafka.network RequestMetrics request=...)
    min_version: int
    max_version: int

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


API_VERSIONS = 18
METADATA = 3
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

# Served by the connection itself, whose identity they change (server/kafka/sasl_api.py).
CONNECTION_APIS = frozenset((SASL_HANDSHAKE, SASL_AUTHENTICATE))
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
DESCRIBE_QUORUM = 55
DESCRIBE_CLUSTER = 60
DESCRIBE_LOG_DIRS = 35
DESCRIBE_PRODUCERS = 61
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

SERVED: dict[int, ApiRange] = {
    api.key: api
    for api in (
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        # From v0, as Kafka 4 (KIP-896 kept every Metadata version): Debian 12's kcat links
        # librdkafka 2.0.2, which asks for v4 at most; aiokafka for v0-5.
        ApiRange(METADATA, "Metadata", 0, 13),
        # From v0 (then the SASL tokens come bare, without Kafka's framing: sasl_api.py), as
        # Kafka 4: librdkafka 2.0.2 (Debian 12's kcat) turns SASL on only with v0 served.
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1),
        # From v0, as Kafka 4: librdkafka 2.0.2 sends SaslAuthenticate requests (not bare
        # tokens) only when v0 is served.
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
        # The consumer-group APIs (group_apis.py). Those librdkafka's balanced consumer
        # needs start at Kafka 4's lowest versions: it joins a group only when the broker's
        # ranges overlap FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup v0,
        # OffsetCommit v1-2 and OffsetFetch v1 (rd_kafka_feature_map's
        # BrokerBalancedConsumer; LZ4 also needs FindCoordinator v0), so Debian 12's kcat
        # (librdkafka 2.0.2) `-G` never looked for a coordinator. It then sends their
        # newest versions in its range (FindCoordinator 2, JoinGroup 5, OffsetCommit 7).
        ApiRange(FIND_COORDINATOR, "FindCoordinator", 0, 6),
        ApiRange(JOIN_GROUP, "JoinGroup", 0, 7),
        ApiRange(SYNC_GROUP, "SyncGroup", 0, 5),
        ApiRange(HEARTBEAT, "Heartbeat", 0, 4),
        ApiRange(LEAVE_GROUP, "LeaveGroup", 0, 5),
        ApiRange(OFFSET_COMMIT, "OffsetCommit", 2, 9),
        ApiRange(OFFSET_FETCH, "OffsetFetch", 1, 9),
        ApiRange(LIST_GROUPS, "ListGroups", 1, 5),
        ApiRange(DESCRIBE_GROUPS, "DescribeGroups", 3, 6),
        ApiRange(DELETE_GROUPS, "DeleteGroups", 1, 2),
        ApiRange(OFFSET_DELETE, "OffsetDelete", 0, 0),
        # The data plane from Kafka 4's lowest versions (KIP-896): librdkafka turns a
        # feature on only when the broker's range overlaps the version that brought it
        # (rd_kafka_feature_map: RecordBatch v2 needs Produce 3 and Fetch 4, offsets by time
        # ListOffsets 1), so without them Debian 12's kcat (librdkafka 2.0.2) sends
        # MessageSet v1, which Kafka 4 and Strom refuse.
        ApiRange(PRODUCE, "Produce", 3, 10),
        ApiRange(FETCH, "Fetch", 4, 16),
        ApiRange(LIST_OFFSETS, "ListOffsets", 1, 10),
        ApiRange(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4),
        ApiRange(DELETE_RECORDS, "DeleteRecords", 0, 2),
        ApiRange(INIT_PRODUCER_ID, "InitProducerId", 0, 4),
        ApiRange(CREATE_TOPICS, "CreateTopics", 3, 7),
        ApiRange(DELETE_TOPICS, "DeleteTopics", 3, 6),
        ApiRange(CREATE_PARTITIONS, "CreatePartitions", 1, 3),
        ApiRange(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4),
        ApiRange(ALTER_CONFIGS, "AlterConfigs", 1, 2),
        ApiRange(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 1, 1),
        ApiRange(ELECT_LEADERS, "ElectLeaders", 2, 2),
        ApiRange(ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),
        ApiRange(LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
        ApiRange(DESCRIBE_QUORUM, "DescribeQuorum", 2, 2),
        ApiRange(DESCRIBE_CLUSTER, "DescribeCluster", 2, 2),
        ApiRange(DESCRIBE_LOG_DIRS, "DescribeLogDirs", 5, 5),
        ApiRange(DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0),
        # From v1 (Kafka 4's lowest, KIP-896): librdkafka asks for up to v2, kafka-python
        # for v3 (USER resources need it).
        ApiRange(DESCRIBE_ACLS, "DescribeAcls", 1, 3),
        ApiRange(CREATE_ACLS, "CreateAcls", 1, 3),
        ApiRange(DELETE_ACLS, "DeleteAcls", 1, 3),
        ApiRange(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
        ApiRange(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
    )
}
