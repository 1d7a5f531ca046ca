"""Kafka's ACL vocabulary, with Kafka's names and wire codes (`org.apache.kafka.common.acl`
and `org.apache.kafka.common.resource`): shared by the authorizer (metadata/), the brokers
that ask it (broker/), and the `strom acls` tool and AdminClient (strom/), so every side
reads and writes the same numbers.

The codes are those of Kafka's CreateAcls/DescribeAcls requests and of its
AccessControlEntryRecord; `ANY` and `MATCH` appear only in filters (describe, delete).
"""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The one name of the cluster resource (Kafka's `kafka-cluster`), and the wildcards.
CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
ANONYMOUS = "User:ANONYMOUS"
