"""A few well-formed requests per RPC: what mutations start from.

Each is what a correct client (or peer) would send, against the fuzzed cluster's topics and
groups. Senders that only the cluster's own members may be (a Raft voter, a replica, a
registered broker) are given ids that are not members: forging a member is the security
issue's subject, not robustness's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from tests.fuzz import sasl
from tests.fuzz.batches import valid_batch
from tests.fuzz.services import Rpc
from tests.fuzz.values import Context

Seed = Callable[[random.Random, Context], dict[str, Any]]


def _topic(rng: random.Random, ctx: Context) -> tuple[str, int]:
    name = rng.choice(list(ctx.topics))
    return name, rng.randrange(ctx.topics[name])


def _produce(rng: random.Random, ctx: Context) -> dict[str, Any]:
    name, p = _topic(rng, ctx)
    return {
        "acks": rng.choice((-1, 1, 0)),
        "timeout_ms": 1500,
        "topics": [{"name": name, "partitions": [{"partition": p, "records": valid_batch(rng)}]}],
    }


def _fetch(rng: random.Random, ctx: Context) -> dict[str, Any]:
    name, p = _topic(rng, ctx)
    return {
        "max_wait_ms": rng.choice((0, 100)),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "replica_id": -1,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def _by_partition(key: str, value: Callable[[random.Random], Any]) -> Seed:
    def build(rng: random.Random, ctx: Context) -> dict[str, Any]:
        name, p = _topic(rng, ctx)
        return {"topics": [{"name": name, "partitions": [{"partition": p, key: value(rng)}]}]}

    return build


def _group(rng: random.Random, ctx: Context) -> str:
    return rng.choice(ctx.groups)


def _join(rng: random.Random, ctx: Context) -> dict[str, Any]:
    return {
        "group_id": _group(rng, ctx),
        "session_timeout_ms": 6000,
        "rebalance_timeout_ms": 1000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x00"}],
    }


def _raft(rng: random.Random, ctx: Context) -> dict[str, Any]:
    body = rng.choice(
        (
            ("vote_request", {"epoch": 2, "last_epoch": 1, "end_offset": 10, "pre_vote": True}),
            ("begin_quorum_epoch_request", {"epoch": 1}),
            ("end_quorum_epoch_request", {"epoch": 1, "preferred_successors": [1, 2]}),
            (
                "fetch_request",
                {
                    "epoch": 1,
                    "fetch_offset": 0,
                    "last_fetched_epoch": 0,
                    "max_entries": 10,
                    "high_watermark": 0,
                },
            ),
            (
                "fetch_snapshot_request",
                {
                    "epoch": 1,
                    "snapshot_id": {"end_offset": 1, "epoch": 1},
                    "position": 0,
                    "max_bytes": 1024,
                },
            ),
            ("vote_response", {"epoch": 1, "leader_id": 1, "granted": True}),
            ("fetch_response", {"epoch": 1, "leader_id": 99, "high_watermark": 5}),
        )
    )
    return {"src": rng.choice(ctx.non_members), "dst": rng.choice(ctx.members), body[0]: body[1]}


def _replica_fetch(rng: random.Random, ctx: Context) -> dict[str, Any]:
    name, p = _topic(rng, ctx)
    return {
        "replica_id": rng.choice(ctx.non_members),
        "broker_epoch": 1,
        "max_wait_ms": rng.choice((0, 100)),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "partitions": [
            {
                "topic_id": ctx.topic_ids[name],
                "partition": p,
                "current_leader_epoch": 0,
                "fetch_offset": 0,
                "last_fetched_epoch": -1,
                "partition_max_bytes": 1 << 20,
            }
        ],
        # A session (KIP-227): a full fetch asking for one, or an incremental one the
        # mutator may turn into an unknown id or a wrong epoch.
        "session_id": rng.choice((0, 1, 2**31 - 1)),
        "session_epoch": rng.choice((-1, 0, 1)),
        "forgotten": [{"topic_id": ctx.topic_ids[name], "partition": p}],
    }


def _create_topics(rng: random.Random, ctx: Context) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": f"fuzz-new-{rng.randrange(100)}",
                "num_partitions": 1,
                "replication_factor": rng.choice((1, 3)),
                "configs": {"retention.ms": "60000"},
            }
        ]
    }


def _alter_configs(rng: random.Random, ctx: Context) -> dict[str, Any]:
    name, _ = _topic(rng, ctx)
    return {
        "resources": [
            {
                "resource": {"type": "TOPIC", "name": name},
                "ops": [{"name": "retention.ms", "op": "SET", "value": "3600000"}],
            }
        ],
        "validate_only": rng.random() < 0.5,
    }


def _tp(rng: random.Random, ctx: Context) -> dict[str, Any]:
    name, p = _topic(rng, ctx)
    return {"topic": name, "partition": p}


SEEDS: dict[str, Seed] = {
    "Metadata": lambda rng, ctx: {"topics": [_topic(rng, ctx)[0]]},
    "Produce": _produce,
    "ProduceStream": _produce,
    "Fetch": _fetch,
    "FetchStream": _fetch,
    "ListOffsets": _by_partition("timestamp", lambda rng: rng.choice((-1, -2, 1_700_000_000_000))),
    "OffsetsForLeaderEpoch": _by_partition("leader_epoch", lambda rng: rng.choice((0, 1, 5))),
    "InitProducerId": lambda rng, ctx: {"producer_id": -1, "producer_epoch": -1},
    "DeleteRecords": _by_partition("offset", lambda rng: rng.choice((0, 1, -1))),
    "FindCoordinator": lambda rng, ctx: {"key": _group(rng, ctx)},
    "JoinGroup": _join,
    "SyncGroup": lambda rng, ctx: {
        "group_id": _group(rng, ctx),
        "generation_id": 1,
        "member_id": "m-1",
        "assignments": [{"member_id": "m-1"}],
    },
    "Heartbeat": lambda rng, ctx: {
        "group_id": _group(rng, ctx),
        "generation_id": 1,
        "member_id": "m-1",
    },
    "LeaveGroup": lambda rng, ctx: {
        "group_id": _group(rng, ctx),
        "members": [{"member_id": "m-1"}],
    },
    "OffsetCommit": lambda rng, ctx: {
        "group_id": _group(rng, ctx),
        "generation_id": -1,
        "topics": [
            {"name": _topic(rng, ctx)[0], "partitions": [{"partition": 0, "committed_offset": 1}]}
        ],
    },
    "OffsetFetch": lambda rng, ctx: {"group_id": _group(rng, ctx)},
    "DescribeGroups": lambda rng, ctx: {"groups": [_group(rng, ctx)]},
    "ListGroups": lambda rng, ctx: {"states_filter": rng.choice(([], ["Stable"]))},
    "DeleteGroups": lambda rng, ctx: {"groups": [_group(rng, ctx)]},
    "DescribeLogDirs": lambda rng, ctx: rng.choice(
        (
            {"all_topics": True},
            {"topics": [{"name": _topic(rng, ctx)[0], "partitions": [0, 1]}]},
        )
    ),
    "OffsetDelete": lambda rng, ctx: {
        "group_id": _group(rng, ctx),
        "topics": [{"name": _topic(rng, ctx)[0], "partitions": [0]}],
    },
    "RegisterBroker": lambda rng, ctx: {
        "broker_id": rng.choice(ctx.non_members),
        "cluster_id": "x",
        "incarnation_id": bytes(16),
        "endpoints": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1}],
    },
    "BrokerHeartbeat": lambda rng, ctx: {
        "broker_id": rng.choice(ctx.non_members),
        "broker_epoch": 1,
    },
    "AlterPartition": lambda rng, ctx: {
        "broker_id": rng.choice(ctx.non_members),
        "broker_epoch": 1,
        "partitions": [
            {
                "topic_id": rng.choice(list(ctx.topic_ids.values())),
                "partition": 0,
                "leader_epoch": 0,
                "partition_epoch": 0,
                "new_isr": [1, 2, 3],
            }
        ],
    },
    "AllocateProducerIds": lambda rng, ctx: {
        "broker_id": rng.choice(ctx.non_members),
        "broker_epoch": 1,
    },
    "CreateTopics": _create_topics,
    "DeleteTopics": lambda rng, ctx: {"names": [f"fuzz-new-{rng.randrange(100)}"]},
    "CreatePartitions": lambda rng, ctx: {"name": _topic(rng, ctx)[0], "count": 5},
    "DescribeCluster": lambda rng, ctx: {},
    "DescribeTopics": lambda rng, ctx: {"names": [_topic(rng, ctx)[0]]},
    "DescribeQuorum": lambda rng, ctx: {},
    "ElectLeaders": lambda rng, ctx: {"election_type": "PREFERRED", "partitions": [_tp(rng, ctx)]},
    "AlterPartitionReassignments": lambda rng, ctx: {
        "reassignments": [{"partition": _tp(rng, ctx), "replicas": {"ids": [3, 2, 1]}}]
    },
    "ListPartitionReassignments": lambda rng, ctx: {},
    "IncrementalAlterConfigs": _alter_configs,
    "DescribeConfigs": lambda rng, ctx: {
        "resources": [{"type": "TOPIC", "name": _topic(rng, ctx)[0]}]
    },
    "CreateAcls": lambda rng, ctx: {
        "creations": [
            {
                "resource_type": 2,  # TOPIC
                "resource_name": _topic(rng, ctx)[0],
                "pattern_type": rng.choice((3, 4)),  # LITERAL, PREFIXED
                "principal": "User:fuzz",  # not User:*: a DENY must not lock the checks out
                "host": "*",
                "operation": rng.choice((2, 3, 4, 8)),  # ALL, READ, WRITE, DESCRIBE
                "permission_type": rng.choice((2, 3)),  # DENY, ALLOW
            }
        ]
    },
    "DescribeAcls": lambda rng, ctx: {
        "filter": {"resource_type": 1, "pattern_type": 1, "operation": 1, "permission_type": 1}
    },
    "DeleteAcls": lambda rng, ctx: {
        "filters": [
            {
                "resource_type": 2,
                "resource_name": _topic(rng, ctx)[0],
                "pattern_type": 2,  # MATCH
                "principal": "User:fuzz",
                "operation": 1,
                "permission_type": 1,
            }
        ]
    },
    # Never the secured cluster's own users (tests/fuzz/secured.py): a credential the fuzzer
    # replaced would lock its own checks out.
    "DescribeUserScramCredentials": lambda rng, ctx: {
        "users": rng.choice(([], [f"fuzz-scram-{rng.randint(0, 9)}"]))
    },
    "AlterUserScramCredentials": lambda rng, ctx: {
        "upsertions": [
            {
                "name": f"fuzz-scram-{rng.randint(0, 9)}",
                "mechanism": rng.choice((1, 2)),  # SCRAM-SHA-256, SCRAM-SHA-512
                "iterations": rng.choice((4096, 8192)),
                "salt": rng.randbytes(16),
                "salted_password": rng.randbytes(rng.choice((32, 64))),
            }
        ],
        "deletions": [{"name": f"fuzz-scram-{rng.randint(0, 9)}", "mechanism": 1}],
    },
    "Exchange": _raft,
    "Check": lambda rng, ctx: {"service": rng.choice(("", "strom"))},
    # A SCRAM client-first (tests/fuzz/sasl.py makes whole exchanges; this is what the
    # generic mutations start from).
    "SaslAuthenticate": lambda rng, ctx: {
        "mechanism": rng.choice(("SCRAM-SHA-512", "PLAIN")),
        "auth_bytes": sasl.client_first(rng),
    },
    "Watch": lambda rng, ctx: {"service": ""},
    "List": lambda rng, ctx: {},
}


def well_formed(rng: random.Random, rpc: Rpc, ctx: Context) -> Any:
    """One well-formed request message of `rpc`."""
    build = _replica_fetch if rpc.service == "ReplicaService" else SEEDS[rpc.method]
    return rpc.request_class()(**build(rng, ctx))


def missing(rpcs: list[Rpc]) -> list[str]:
    """RPCs without a seed (a new RPC in a .proto must get one: tests check this)."""
    return [r.name for r in rpcs if r.service != "ReplicaService" and r.method not in SEEDS]
