"""The controller's min.insync.replicas and unclean.leader.election.enable are the ones the
brokers apply (issue 17): the topic's value, else the controller node's per-broker dynamic
config, the cluster default, its static server.properties, and last Kafka's default, as
Kafka's ConfigurationControlManager.getTopicConfig resolves them. deploy/k8s sets
min.insync.replicas=2 in server.properties only: a controller that ignored it ran the ELR
logic with 1 and protected nothing."""

from __future__ import annotations

import pytest

from metadata.alter_partition import IsrProposal, alter_partition
from metadata.broker_lifecycle import (
    fence_broker,
    min_insync_replicas,
    unclean_election_enabled,
    unfence_broker,
)
from metadata.config_control import LocalConfig, effective_topic_config
from metadata.records import NO_LEADER
from metadata.topic_control import NewTopic, create_topics
from strom_api.v1 import metadata_pb2 as pb
from tests.metadata.test_broker_lifecycle import started

NODE = 1  # the controller's node id (a combined node: also broker 1)


def config_record(resource_type: int, name: str, key: str, value: str) -> pb.ConfigRecord:
    return pb.ConfigRecord(
        resource_type=pb.ConfigResourceType.Name(resource_type),
        resource_name=name,
        name=key,
        value=value,
    )


def cluster(topic_configs=None, broker_configs=()):
    """Brokers 1-3 unfenced, topic t with replicas [3, 1, 2], and the given dynamic
    broker configs as (resource name, key, value)."""
    c, epochs = started(3)
    records, _ = create_topics(
        c.image, [NewTopic("t", assignments={0: [3, 1, 2]}, configs=topic_configs or {})]
    )
    c.commit(records)
    c.commit([config_record(pb.BROKER, name, k, v) for name, k, v in broker_configs])
    return c, epochs


@pytest.mark.parametrize(
    ("topic", "broker_configs", "static", "expected"),
    [
        ({}, (), {}, "1"),  # Kafka's default
        ({}, (), {"min.insync.replicas": "2"}, "2"),  # server.properties
        ({}, [("", "min.insync.replicas", "3")], {"min.insync.replicas": "2"}, "3"),
        ({}, [(str(NODE), "min.insync.replicas", "2")], {"min.insync.replicas": "3"}, "2"),
        ({}, [("2", "min.insync.replicas", "3")], {"min.insync.replicas": "2"}, "2"),  # not ours
        (
            {"min.insync.replicas": "1"},
            [(str(NODE), "min.insync.replicas", "3")],
            {"min.insync.replicas": "2"},
            "1",
        ),
    ],
)
def test_the_effective_value_is_found_where_kafka_looks(topic, broker_configs, static, expected):
    c, _ = cluster(topic, broker_configs)
    local = LocalConfig(NODE, static)
    assert effective_topic_config(c.image, "t", "min.insync.replicas", local) == expected
    assert min_insync_replicas(c.image, "t", local) == int(expected)


def elr_after_two_fences(c, local: LocalConfig) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Replicas [3, 1, 2]: 2 is fenced, then 1. With min.insync.replicas=2 the ISR is below
    it when 1 leaves, the high watermark stood still, and 1 joins the ELR."""
    c.commit(fence_broker(c.image, 2, local))
    c.commit(fence_broker(c.image, 1, local))
    p = c.image.topics.partition("t", 0)
    return p.leader, p.isr, p.elr


def test_a_static_min_insync_replicas_feeds_the_elr_as_a_topic_config_does():
    by_topic, _ = cluster({"min.insync.replicas": "2"})
    assert elr_after_two_fences(by_topic, LocalConfig(NODE)) == (3, (3,), (1,))
    by_static, _ = cluster()
    static = LocalConfig(NODE, {"min.insync.replicas": "2"})
    assert elr_after_two_fences(by_static, static) == (3, (3,), (1,))
    # Without it the controller would use 1: no ELR, and 1 may not lead cleanly later.
    unset, _ = cluster()
    assert elr_after_two_fences(unset, LocalConfig(NODE)) == (3, (3,), ())


def test_the_elr_member_leads_when_the_last_isr_member_goes_with_a_static_min_isr():
    c, _ = cluster()
    local = LocalConfig(NODE, {"min.insync.replicas": "2"})
    elr_after_two_fences(c, local)
    c.commit(unfence_broker(c.image, 1, local))  # back, not in the ISR: eligible still
    c.commit(fence_broker(c.image, 3, local))
    p = c.image.topics.partition("t", 0)
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (1, (1,), (3,), pb.RECOVERED)


def test_an_isr_shrink_below_a_static_min_isr_moves_the_leaver_to_the_elr():
    c, epochs = cluster()
    topic_id = c.image.topics.by_name["t"].topic_id
    local = LocalConfig(NODE, {"min.insync.replicas": "3"})
    p = c.image.topics.partition("t", 0)
    proposal = IsrProposal(topic_id, 0, p.leader_epoch, p.partition_epoch, (3, 1))
    records, [result] = alter_partition(c.image, 3, epochs[3], [proposal], local)
    assert result.error is None and result.registration.elr == (2,)
    records, [result] = alter_partition(c.image, 3, epochs[3], [proposal])
    assert result.error is None and result.registration.elr == ()


def test_a_static_unclean_leader_election_enable_allows_an_unclean_election():
    local = LocalConfig(NODE, {"unclean.leader.election.enable": "true"})
    for allowed in (local, LocalConfig(NODE)):
        c, _ = cluster()
        for b in (2, 1, 3):  # 3, the last ISR member, goes last
            c.commit(fence_broker(c.image, b, allowed))
        assert c.image.topics.partition("t", 0).leader == NO_LEADER
        c.commit(unfence_broker(c.image, 2, allowed))  # outside the ISR (and the ELR)
        p = c.image.topics.partition("t", 0)
        if allowed is local:
            assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), pb.RECOVERING)
        else:
            assert p.leader == NO_LEADER


def test_a_topic_config_overrides_a_static_unclean_leader_election_enable():
    c, _ = cluster({"unclean.leader.election.enable": "false"})
    local = LocalConfig(NODE, {"unclean.leader.election.enable": "true"})
    assert not unclean_election_enabled(c.image, "t", local)
    assert unclean_election_enabled(cluster()[0].image, "t", local)
