"""Without a cluster: when a group leader's assignment no longer covers the group's
partitions (Kafka's assignment snapshot against newer metadata)."""

from __future__ import annotations

from strom.assignors import by_name
from strom.cluster import Cluster
from strom.membership import AssignmentSnapshot, GroupMembership, GroupSettings


def member() -> GroupMembership:
    settings = GroupSettings("g", None, "c", 3000, 10_000, 300, (by_name("range"),), 1000, 100)
    group = GroupMembership(Cluster(["127.0.0.1:1"]), settings, lambda: ["orders"])
    group.rejoin = False  # as after a join
    return group


def test_only_a_changed_count_of_the_groups_topics_makes_the_leader_rejoin():
    group = member()
    assert not group.metadata_changed({"orders": 3})  # not the leader: it does not watch
    assert group.group_topics() == frozenset()
    group.assignment_snapshot = AssignmentSnapshot(frozenset({"orders", "refunds"}), {"orders": 1})
    assert group.group_topics() == {"orders", "refunds"}
    assert not group.metadata_changed({"orders": 1, "unrelated": 7})
    assert not group.rejoin
    assert group.metadata_changed({"orders": 3})
    assert group.rejoin
    assert not group.metadata_changed({"orders": 4})  # already rejoining


def test_a_subscribed_topic_created_or_deleted_makes_the_leader_rejoin():
    group = member()
    group.assignment_snapshot = AssignmentSnapshot(frozenset({"orders", "refunds"}), {"orders": 1})
    assert group.metadata_changed({"orders": 1, "refunds": 2})
    group = member()
    group.assignment_snapshot = AssignmentSnapshot(frozenset({"orders"}), {"orders": 1})
    assert group.metadata_changed({})
