"""Authorization on every request path (issue 18), with real node processes and real mTLS.

One module-scoped cluster of three combined nodes, every listener SSL with client
certificates required, authorizer.class.name set and no ACLs: the nodes' certificate
(CN=strom-node) and the admin's (CN=strom-client) are super.users; alice (CN=alice, same CA)
is authenticated but may do nothing. Each attack of the issue is made as alice, through the
client library where a client would and by raw RPCs where an attacker would, and must be
refused with Kafka's error and change nothing: the admin's view and the metadata image show
it. A second, one-node cluster shows allow.everyone.if.no.acl.found=true letting her act.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import grpc
import pytest
from node_cluster import ROOT, NodeCluster, wait_until
from tls_cluster import TlsCluster

from strom.admin import AdminClient, ConfigResource, NewTopic
from strom.consumer import Consumer
from strom.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from strom.fetcher import TopicPartition
from strom.producer import Producer
from strom_api.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from strom_api.records import Record, encode_batch
from strom_api.v1 import (
    client_pb2,
    client_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    raft_pb2,
    raft_pb2_grpc,
    replica_pb2,
    replica_pb2_grpc,
)
from tests.tls_certs import Certs, make_certs

TOPIC = "orders"
GROUP = "admins"
ALICE = "User:CN=alice"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:CN=strom-node;User:CN=strom-client",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, certs):
    """The cluster, with TOPIC (3 partitions, 3 replicas) holding 6 records the admin's
    group GROUP has consumed and committed (so __consumer_offsets exists)."""
    TlsCluster.certs = certs
    cluster = TlsCluster(str(tmp_path_factory.mktemp("authz")), 3, extra=AUTHORIZER)
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
            admin.create_topics([NewTopic(TOPIC, 3, 3)])
        with Producer(bootstrap(cluster), acks="all", **ssl(certs)) as producer:  # type: ignore[arg-type]
            for i in range(6):
                producer.send(TOPIC, b"v%d" % i, partition=i % 3)
            producer.flush()
        consumer = Consumer(
            TOPIC,
            bootstrap_servers=bootstrap(cluster),
            group_id=GROUP,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=10_000,
            **ssl(certs),  # type: ignore[arg-type]
        )
        with consumer:
            seen = [r.value for _, r in zip(range(6), consumer, strict=False)]
            consumer.commit()
        assert sorted(seen) == [b"v%d" % i for i in range(6)]
        yield cluster
    finally:
        cluster.stop_all()


def bootstrap(cluster: NodeCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)


def ssl(certs: Certs, keystore: str | None = None) -> dict[str, object]:
    return {
        "security_protocol": "SSL",
        "ssl_cafile": certs.ca,
        "ssl_certfile": keystore or certs.client_keystore,
    }


def alice(certs: Certs) -> dict[str, object]:
    return ssl(certs, certs.alice_keystore)


def client_stub(cluster: TlsCluster, node: int, keystore: str | None = None) -> Any:
    channel = cluster.channel(f"127.0.0.1:{cluster.broker_port[node]}", keystore)
    return client_pb2_grpc.ClientServiceStub(channel)  # type: ignore[no-untyped-call]


def controller_stub(cluster: TlsCluster, node: int, keystore: str) -> Any:
    channel = cluster.channel(f"127.0.0.1:{cluster.controller_port[node]}", keystore)
    return controller_pb2_grpc.ControllerServiceStub(channel)  # type: ignore[no-untyped-call]


def name(error: Any) -> str:
    return str(common_pb2.ErrorCode.Name(error.code))


def leader_of(cluster: TlsCluster, partition: int) -> int:
    described = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC]))
    return int(described.topics[0].partitions[partition].leader)


def offsets(cluster: TlsCluster, timestamp: int) -> list[int]:
    """The admin's view of TOPIC's partitions: -1 latest (high watermark), -2 earliest."""
    out = []
    for p in range(3):
        request = client_pb2.ListOffsetsRequest(
            topics=[
                client_pb2.ListOffsetsRequest.Topic(
                    name=TOPIC,
                    partitions=[
                        client_pb2.ListOffsetsRequest.Partition(partition=p, timestamp=timestamp)
                    ],
                )
            ]
        )
        answer = client_stub(cluster, leader_of(cluster, p)).ListOffsets(request, timeout=10)
        item = answer.topics[0].partitions[0]
        assert name(item.error) == "NONE", item.error.message
        out.append(item.offset)
    return out


def test_the_admin_does_everything(cluster, certs):
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        assert {TOPIC, "__consumer_offsets"} <= admin.list_topics()
        resource = ConfigResource("topic", TOPIC)
        admin.incremental_alter_configs(resource, {"retention.ms": "3600000"})
        assert admin.describe_configs(resource)["retention.ms"] == "3600000"
        assert admin.describe_metadata_quorum()["leader_id"] in cluster.ids
        assert GROUP in [g.group_id for g in admin.list_consumer_groups()]
        assert sum(admin.list_consumer_group_offsets(GROUP).values()) == 6


def test_alice_cannot_produce_and_nothing_is_written(cluster, certs):
    before = offsets(cluster, -1)
    leader = leader_of(cluster, 0)
    request = client_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name=TOPIC,
                partitions=[
                    client_pb2.ProduceRequest.Partition(
                        partition=0, records=encode_batch([Record(0, 0, None, b"forged")])
                    )
                ],
            )
        ],
    )
    answer = client_stub(cluster, leader, certs.alice_keystore).Produce(request, timeout=10)
    item = answer.topics[0].partitions[0]
    assert name(item.error) == "TOPIC_AUTHORIZATION_FAILED"
    assert item.error.message.startswith("Not authorized to access topics: [orders]")
    assert not item.error.retriable
    started = time.monotonic()
    with (
        Producer(bootstrap(cluster), **alice(certs)) as producer,  # type: ignore[arg-type]
        pytest.raises(TopicAuthorizationFailedError, match="TOPIC_AUTHORIZATION_FAILED"),
    ):
        producer.send(TOPIC, b"refused").get(timeout=30)
    assert time.monotonic() - started < 10, "not at once"
    assert offsets(cluster, -1) == before


def test_alice_cannot_fetch_list_offsets_delete_records_or_get_a_producer_id(cluster, certs):
    leader = leader_of(cluster, 0)
    stub = client_stub(cluster, leader, certs.alice_keystore)
    fetched = stub.Fetch(
        client_pb2.FetchRequest(
            max_wait_ms=0,
            topics=[
                client_pb2.FetchRequest.Topic(
                    name=TOPIC, partitions=[client_pb2.FetchRequest.Partition(partition=0)]
                )
            ],
        ),
        timeout=10,
    )
    assert name(fetched.topics[0].partitions[0].error) == "TOPIC_AUTHORIZATION_FAILED"
    assert fetched.topics[0].partitions[0].records == b""
    listed = stub.ListOffsets(
        client_pb2.ListOffsetsRequest(
            topics=[
                client_pb2.ListOffsetsRequest.Topic(
                    name=TOPIC,
                    partitions=[client_pb2.ListOffsetsRequest.Partition(partition=0, timestamp=-1)],
                )
            ]
        ),
        timeout=10,
    )
    assert name(listed.topics[0].partitions[0].error) == "TOPIC_AUTHORIZATION_FAILED"
    deleted = stub.DeleteRecords(
        client_pb2.DeleteRecordsRequest(
            topics=[
                client_pb2.DeleteRecordsRequest.Topic(
                    name=TOPIC,
                    partitions=[client_pb2.DeleteRecordsRequest.Partition(partition=0, offset=-1)],
                )
            ]
        ),
        timeout=10,
    )
    assert name(deleted.topics[0].partitions[0].error) == "TOPIC_AUTHORIZATION_FAILED"
    assert offsets(cluster, -2) == [0, 0, 0]
    # Fencing another client's idempotent producer starts with a producer id of one's own.
    pid = stub.InitProducerId(client_pb2.InitProducerIdRequest(producer_id=-1), timeout=10)
    assert name(pid.error) == "CLUSTER_AUTHORIZATION_FAILED"
    assert pid.producer_id == -1


def test_alice_cannot_delete_create_or_reconfigure_topics(cluster, certs):
    with AdminClient(bootstrap(cluster), **alice(certs)) as admin:  # type: ignore[arg-type]
        for doomed in ("__consumer_offsets", TOPIC):
            with pytest.raises(TopicAuthorizationFailedError, match=f"\\[{doomed}\\]"):
                admin.delete_topics([doomed])
        with pytest.raises(TopicAuthorizationFailedError):
            admin.create_topics([NewTopic("alices-topic", 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            admin.incremental_alter_configs(ConfigResource("topic", TOPIC), {"retention.ms": "1"})
        with pytest.raises(ClusterAuthorizationFailedError):
            admin.incremental_alter_configs(ConfigResource("broker", ""), {"log.retention.ms": "1"})
        with pytest.raises(TopicAuthorizationFailedError):
            admin.describe_configs(ConfigResource("topic", TOPIC))
        with pytest.raises(ClusterAuthorizationFailedError):
            admin.describe_metadata_quorum()
        with pytest.raises(ClusterAuthorizationFailedError):
            admin.elect_leaders("preferred")
    # The controller checks its own callers too: alice on a CONTROLLER listener directly.
    active = cluster.active_controller()
    stub = controller_stub(cluster, active, certs.alice_keystore)
    answer = stub.DeleteTopics(
        controller_pb2.DeleteTopicsRequest(names=["__consumer_offsets"]), timeout=10
    )
    assert name(answer.topics[0].error) == "TOPIC_AUTHORIZATION_FAILED"
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        topics = admin.list_topics()
        assert {TOPIC, "__consumer_offsets"} <= topics and "alices-topic" not in topics
        configs = admin.describe_configs(ConfigResource("topic", TOPIC))
        assert configs["retention.ms"] != "1"


def test_alice_cannot_join_commit_to_or_delete_a_group(cluster, certs):
    consumer = Consumer(
        TOPIC,
        bootstrap_servers=bootstrap(cluster),
        group_id="alices",
        **alice(certs),  # type: ignore[arg-type]
    )
    # Its subscription's metadata is refused first (no DESCRIBE on the topic), at once.
    with consumer, pytest.raises(TopicAuthorizationFailedError, match=TOPIC):
        consumer.poll(timeout_ms=10_000)
    with AdminClient(bootstrap(cluster), **alice(certs)) as admin:  # type: ignore[arg-type]
        with pytest.raises(GroupAuthorizationFailedError, match=GROUP):
            admin.describe_consumer_groups([GROUP])
        with pytest.raises(GroupAuthorizationFailedError, match=GROUP):
            admin.list_consumer_group_offsets(GROUP)
    for node in cluster.ids:  # every broker refuses, coordinator or not
        stub = client_stub(cluster, node, certs.alice_keystore)
        joined = stub.JoinGroup(
            client_pb2.JoinGroupRequest(group_id=GROUP, protocol_type="consumer"), timeout=10
        )
        assert name(joined.error) == "GROUP_AUTHORIZATION_FAILED"
        committed = stub.OffsetCommit(
            client_pb2.OffsetCommitRequest(
                group_id=GROUP,
                generation_id=-1,
                topics=[
                    client_pb2.OffsetCommitRequest.Topic(
                        name=TOPIC,
                        partitions=[
                            client_pb2.OffsetCommitRequest.Partition(
                                partition=0, committed_offset=0
                            )
                        ],
                    )
                ],
            ),
            timeout=10,
        )
        assert name(committed.error) == "GROUP_AUTHORIZATION_FAILED"
        deleted = stub.DeleteGroups(client_pb2.DeleteGroupsRequest(groups=[GROUP]), timeout=10)
        assert name(deleted.results[0].error) == "GROUP_AUTHORIZATION_FAILED"
        assert stub.ListGroups(client_pb2.ListGroupsRequest(), timeout=10).groups == []
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        assert sum(admin.list_consumer_group_offsets(GROUP).values()) == 6


def test_metadata_hides_the_topics_alice_may_not_describe(cluster, certs):
    stub = client_stub(cluster, 1, certs.alice_keystore)
    everything = stub.Metadata(client_pb2.MetadataRequest(), timeout=10)
    assert list(everything.topics) == []
    assert len(everything.brokers) == 3
    named = stub.Metadata(
        client_pb2.MetadataRequest(topics=[TOPIC, "new-topic"], allow_auto_topic_creation=True),
        timeout=10,
    )
    assert [(t.name, name(t.error), len(t.partitions)) for t in named.topics] == [
        (TOPIC, "TOPIC_AUTHORIZATION_FAILED", 0),
        ("new-topic", "TOPIC_AUTHORIZATION_FAILED", 0),
    ]
    with AdminClient(bootstrap(cluster), **alice(certs)) as admin:  # type: ignore[arg-type]
        assert admin.list_topics() == set()
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        assert "new-topic" not in admin.list_topics()


def test_alice_cannot_grant_herself_rights_or_set_passwords(cluster, certs):
    everything = controller_pb2.AclBinding(
        resource_type=ResourceType.CLUSTER,
        resource_name="kafka-cluster",
        pattern_type=PatternType.LITERAL,
        principal=ALICE,
        host="*",
        operation=AclOperation.ALL,
        permission_type=AclPermissionType.ALLOW,
    )
    any_acl = controller_pb2.AclBindingFilter(
        resource_type=ResourceType.ANY,
        pattern_type=PatternType.ANY,
        operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY,
    )
    password = controller_pb2.AlterUserScramCredentialsRequest.Upsertion(
        name="admin", mechanism=2, iterations=8192, salt=b"s" * 16, salted_password=b"p" * 64
    )
    calls = [
        ("CreateAcls", controller_pb2.CreateAclsRequest(creations=[everything])),
        ("DeleteAcls", controller_pb2.DeleteAclsRequest(filters=[any_acl])),
        ("DescribeAcls", controller_pb2.DescribeAclsRequest(filter=any_acl)),
        (
            "AlterUserScramCredentials",
            controller_pb2.AlterUserScramCredentialsRequest(upsertions=[password]),
        ),
        ("DescribeUserScramCredentials", controller_pb2.DescribeUserScramCredentialsRequest()),
    ]
    active = cluster.active_controller()
    for port in (cluster.broker_port[1], cluster.controller_port[active]):
        stub = controller_pb2_grpc.ControllerServiceStub(  # type: ignore[no-untyped-call]
            cluster.channel(f"127.0.0.1:{port}", certs.alice_keystore)
        )
        for method, request in calls:
            answer = getattr(stub, method)(request, timeout=10)
            assert name(answer.error.error) == "CLUSTER_AUTHORIZATION_FAILED", method
    acls = cluster.call("DescribeAcls", controller_pb2.DescribeAclsRequest(filter=any_acl))
    assert all(a.principal != ALICE or a.operation != AclOperation.ALL for a in acls.acls)
    users = cluster.call(
        "DescribeUserScramCredentials", controller_pb2.DescribeUserScramCredentialsRequest()
    )
    assert [r.user for r in users.results] == []


def refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED, raised.value
    assert raised.value.details().startswith("CLUSTER_AUTHORIZATION_FAILED: "), raised.value
    return raised.value


def test_node_apis_refuse_a_client_principal_and_nothing_changes(cluster, certs):
    """The attacks of issue 18 on node-to-node RPCs, made with alice's valid certificate."""
    before = cluster.describe_cluster()
    topics = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC]))
    topic = topics.topics[0]
    leader = topic.partitions[0].leader
    epochs = {b.broker_id: b.broker_epoch for b in before.brokers}
    keystore = certs.alice_keystore

    # A forged follower fetch (it would acknowledge acks=all writes no follower has).
    replica = replica_pb2_grpc.ReplicaServiceStub(  # type: ignore[no-untyped-call]
        cluster.channel(f"127.0.0.1:{cluster.broker_port[leader]}", keystore)
    )
    follower = next(r for r in topic.partitions[0].replicas if r != leader)
    fetch = replica_pb2.ReplicaFetchRequest(
        replica_id=follower,
        broker_epoch=epochs[follower],
        partitions=[
            replica_pb2.ReplicaFetchRequest.Partition(
                topic_id=topic.topic_id, partition=0, fetch_offset=10**6
            )
        ],
    )
    refused(lambda: list(replica.Fetch(iter([fetch]), timeout=10)))

    active = cluster.active_controller()
    controller = controller_stub(cluster, active, keystore)
    # A fake broker, registered at an address of the attacker's choosing.
    registered = controller.RegisterBroker(
        controller_pb2.RegisterBrokerRequest(
            broker_id=9, cluster_id=cluster.cluster_id, incarnation_id=b"\x01" * 16
        ),
        timeout=10,
    )
    assert name(registered.error.error) == "CLUSTER_AUTHORIZATION_FAILED"
    # A forged controlled shutdown of a live broker.
    victim = next(b for b in cluster.ids if b != active)
    beat = controller.BrokerHeartbeat(
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=victim, broker_epoch=epochs[victim], want_shut_down=True
        ),
        timeout=10,
    )
    assert name(beat.error.error) == "CLUSTER_AUTHORIZATION_FAILED"
    # An ISR shrunk to the leader alone.
    altered = controller.AlterPartition(
        controller_pb2.AlterPartitionRequest(
            broker_id=leader,
            broker_epoch=epochs[leader],
            partitions=[
                controller_pb2.AlterPartitionRequest.Partition(
                    topic_id=topic.topic_id,
                    partition=0,
                    leader_epoch=topic.partitions[0].leader_epoch,
                    new_isr=[leader],
                )
            ],
        ),
        timeout=10,
    )
    assert name(altered.error.error) == "CLUSTER_AUTHORIZATION_FAILED"
    ids = controller.AllocateProducerIds(
        controller_pb2.AllocateProducerIdsRequest(broker_id=leader, broker_epoch=epochs[leader]),
        timeout=10,
    )
    assert name(ids.error.error) == "CLUSTER_AUTHORIZATION_FAILED"
    # The same through a broker's listener (the forwarder checks first).
    forwarded = controller_pb2_grpc.ControllerServiceStub(  # type: ignore[no-untyped-call]
        cluster.channel(f"127.0.0.1:{cluster.broker_port[victim]}", keystore)
    ).BrokerHeartbeat(
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=victim, broker_epoch=epochs[victim], want_shut_down=True
        ),
        timeout=10,
    )
    assert name(forwarded.error.error) == "CLUSTER_AUTHORIZATION_FAILED"
    # Forged Raft messages into the metadata quorum.
    raft = raft_pb2_grpc.RaftServiceStub(  # type: ignore[no-untyped-call]
        cluster.channel(f"127.0.0.1:{cluster.controller_port[active]}", keystore)
    )
    hello = raft_pb2.RaftMessage(src=victim, dst=active)
    refused(lambda: list(raft.Exchange(iter([hello]), timeout=10)))

    after = cluster.describe_cluster()
    assert [
        (b.broker_id, b.broker_epoch, b.fenced, b.in_controlled_shutdown) for b in after.brokers
    ] == [(b.broker_id, b.broker_epoch, False, False) for b in before.brokers]
    again = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC]))
    assert list(again.topics[0].partitions[0].isr) == list(topic.partitions[0].isr)
    assert active == cluster.active_controller()
    # Still serving: the admin produces with acks=all.
    with Producer(bootstrap(cluster), acks="all", **ssl(certs)) as producer:  # type: ignore[arg-type]
        assert producer.send(TOPIC, b"after", partition=1).get(timeout=30).offset >= 0


def test_denials_are_logged_and_counted(cluster, certs):
    # Made here too, so this test stands alone: one denied Produce, one denied Raft stream.
    test_alice_cannot_produce_and_nothing_is_written(cluster, certs)
    leader = leader_of(cluster, 0)
    line = (
        f"Principal = {ALICE} is Denied operation = WRITE from host = 127.0.0.1 on resource = "
        f"Topic:LITERAL:{TOPIC} for request = Produce"
    )
    wait_until(lambda: line in cluster.log_text(leader), 10, "the authorizer's log line")
    denied: dict[str, float] = {}
    for node in cluster.ids:
        for (sample, labels), value in cluster.scrape(node).items():
            if sample == "kafka_server_authorizer_denied_total":
                operation = dict(labels)["operation"]
                denied[operation] = denied.get(operation, 0) + value
    assert denied.get("WRITE", 0) >= 1
    assert denied.get("DESCRIBE", 0) >= 1


def read_acl(resource_type: ResourceType, resource: str) -> Any:
    return controller_pb2.AclBinding(
        resource_type=resource_type,
        resource_name=resource,
        pattern_type=PatternType.LITERAL,
        principal=ALICE,
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    )


def test_an_acl_granting_read_lets_alice_consume_but_not_produce(cluster, certs):
    topic, group = "alice-reads", "alice-readers"
    with AdminClient(bootstrap(cluster), **ssl(certs)) as admin:  # type: ignore[arg-type]
        admin.create_topics([NewTopic(topic, 1, 3)])
    with Producer(bootstrap(cluster), acks="all", **ssl(certs)) as producer:  # type: ignore[arg-type]
        producer.send(topic, b"for alice").get(timeout=30)
    created = cluster.call(
        "CreateAcls",
        controller_pb2.CreateAclsRequest(
            creations=[read_acl(ResourceType.TOPIC, topic), read_acl(ResourceType.GROUP, group)]
        ),
    )
    assert [name(r.error) for r in created.results] == ["NONE", "NONE"]

    def everywhere() -> bool:  # every broker's image has the ACLs
        return all(
            [
                t.name
                for t in client_stub(cluster, n, certs.alice_keystore)
                .Metadata(client_pb2.MetadataRequest(), timeout=10)
                .topics
            ]
            == [topic]
            for n in cluster.ids
        )

    wait_until(everywhere, 20, "the ACLs on every broker")
    consumer = Consumer(
        topic,
        bootstrap_servers=bootstrap(cluster),
        group_id=group,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
        **alice(certs),  # type: ignore[arg-type]
    )
    with consumer:
        assert next(iter(consumer)).value == b"for alice"
        consumer.commit()
        # Her group's offsets for a topic she may not DESCRIBE: refused, not "none yet"
        # (on which a consumer would reset its position).
        orders = TopicPartition(TOPIC, 0)
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.committed(orders)
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.commit({orders: 0})
    # READ implies DESCRIBE, not WRITE: an idempotent producer is refused its producer id
    # (no IDEMPOTENT_WRITE, no WRITE on any topic), a plain one its Produce; both fail the
    # batch at once rather than retrying until delivery.timeout.ms.
    for settings, refusal in [
        ({"acks": "all"}, ClusterAuthorizationFailedError),
        ({"acks": 1}, TopicAuthorizationFailedError),
    ]:
        started = time.monotonic()
        with Producer(bootstrap(cluster), **settings, **alice(certs)) as producer:  # type: ignore[arg-type]
            future = producer.send(topic, b"refused")
            with pytest.raises(refusal):
                future.get(timeout=60)
        assert time.monotonic() - started < 10, f"{refusal.__name__}: not at once"
    assert offsets_of(cluster, topic) == 1


def offsets_of(cluster: TlsCluster, topic: str) -> int:
    described = cluster.call("DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic]))
    leader = described.topics[0].partitions[0].leader
    request = client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(
                name=topic,
                partitions=[client_pb2.ListOffsetsRequest.Partition(partition=0, timestamp=-1)],
            )
        ]
    )
    answer = client_stub(cluster, leader).ListOffsets(request, timeout=10)
    return int(answer.topics[0].partitions[0].offset)


def test_allow_everyone_if_no_acl_found_lets_alice_act(tmp_path, certs):
    TlsCluster.certs = certs
    cluster = TlsCluster(
        str(tmp_path),
        1,
        extra={
            **AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true",
            "offsets.topic.replication.factor": "1",
        },
    )
    cluster.start_all()
    try:
        cluster.wait_for_brokers()
        with AdminClient(bootstrap(cluster), **alice(certs)) as admin:  # type: ignore[arg-type]
            admin.create_topics([NewTopic("alices", 1, 1)])
        with Producer(bootstrap(cluster), acks="all", **alice(certs)) as producer:  # type: ignore[arg-type]
            assert producer.send("alices", b"mine").get(timeout=30).offset == 0
        consumer = Consumer(
            "alices",
            bootstrap_servers=bootstrap(cluster),
            group_id="alices-group",
            auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
            **alice(certs),  # type: ignore[arg-type]
        )
        with consumer:
            assert next(iter(consumer)).value == b"mine"
    finally:
        cluster.stop_all()


def test_an_unknown_authorizer_stops_the_node_with_one_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.voters=1@127.0.0.1:19093\n"
        "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "prometheus.metrics.port=-1\n"
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "strom_tools", "server", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "ERROR INVALID_CONFIG: invalid value 'kafka.security.authorizer.AclAuthorizer' for "
        "config 'authorizer.class.name': Strom's authorizer is "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or StandardAuthorizer); "
        "leave it empty for none"
    ]
