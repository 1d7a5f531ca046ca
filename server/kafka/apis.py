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

SERVED: dict[int, ApiRange] = {
    api.key: api
    for api in (
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        # From v0, as Kafka 4 (KIP-896 kept every Metadata version): Debian 12's kcat links
        # librdkafka 2.0.2, which asks for v4 at most; aiokafka for v0-5.
        ApiRange(METADATA, "Metadata", 0, 13),
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
    )
}
