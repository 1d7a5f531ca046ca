"""The authorization rules of server/request_authorization.py and
server/controller_authorization.py, over the real StandardAuthorizer and real protobuf
messages: who is refused what, with which error and sentence, what is logged and counted,
and what a listing leaves out. (tests/node_integration/test_authorization.py makes the
same requests against real nodes.)"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from metadata.authorizer import AuthorizerSettings, StandardAcl, StandardAuthorizer
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from server.controller_authorization import authorized_call
from server.node_authorizer import NodeAuthorizer
from server.request_authorization import RequestAuthorizer
from server.request_session import Session, enter, leave
from server.server_config import from_properties
from storage.errors import InvalidConfigError
from strom_api.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from strom_api.v1 import common_pb2, controller_pb2
from strom_api.v1 import metadata_pb2 as mpb

ALICE = Session("User:alice", "10.0.0.7", "CLIENT")
BROKER = Session("User:broker", "10.0.0.1", "CONTROLLER")
ADMIN = Session("User:admin", "10.0.0.2", "CLIENT")


def allow(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    principal: str = "User:alice",
    pattern: PatternType = PatternType.LITERAL,
) -> StandardAcl:
    return StandardAcl(
        resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW
    )


ACLS = [
    allow(ResourceType.TOPIC, "orders", AclOperation.WRITE),
    allow(ResourceType.TOPIC, "public-", AclOperation.READ, pattern=PatternType.PREFIXED),
    allow(ResourceType.GROUP, "alices", AclOperation.READ),
    allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION, "User:broker"),
]


def authz(acls: list[StandardAcl] = ACLS, everyone: bool = False) -> RequestAuthorizer:
    authorizer = StandardAuthorizer(acls, AuthorizerSettings(frozenset({"User:admin"}), everyone))
    return RequestAuthorizer(lambda: authorizer)


@pytest.fixture
def as_alice() -> Iterator[None]:
    token = enter(ALICE)
    yield
    leave(token)


def test_without_an_authorizer_everything_is_allowed(as_alice):
    # authorizer.class.name empty: Kafka's default.
    assert RequestAuthorizer().topic("Fetch", "orders") is None
    assert RequestAuthorizer().cluster("RegisterBroker") is None
    assert authz().topic("Fetch", "orders") is not None


def test_the_node_itself_is_never_refused():
    # No session: the node's own timers, its loader, a servicer called directly.
    assert authz().cluster("RegisterBroker") is None
    assert authz().topic("DeleteRecords", "orders") is None


def test_a_refusal_is_kafkas_error_with_who_and_what(as_alice):
    checks = authz()
    error = checks.topic("Fetch", "orders")  # WRITE on orders implies DESCRIBE only
    assert error is not None
    assert error.error_name == "TOPIC_AUTHORIZATION_FAILED"
    assert error.message == (
        "Not authorized to access topics: [orders] (User:alice may not READ Topic 'orders')."
    )
    assert checks.topic("Produce", "orders") is None
    assert checks.topic("Metadata", "orders") is None  # WRITE implies DESCRIBE
    assert checks.topic("Fetch", "public-news") is None  # PREFIXED
    group = checks.group("DeleteGroups", "alices")
    assert group is not None and group.error_name == "GROUP_AUTHORIZATION_FAILED"
    assert checks.group("JoinGroup", "alices") is None
    cluster = checks.cluster("BrokerHeartbeat")
    assert cluster is not None and cluster.error_name == "CLUSTER_AUTHORIZATION_FAILED"
    assert cluster.message.startswith("Cluster authorization failed (User:alice may not ")


def test_super_users_and_allow_everyone(as_alice):
    token = enter(ADMIN)
    assert authz().cluster("AlterPartition") is None
    leave(token)
    assert authz([], everyone=True).topic("DeleteRecords", "orders") is None
    # ACLs on the resource, none for alice: denied even with allow.everyone.if.no.acl.found.
    assert authz(everyone=True).topic("DeleteRecords", "orders") is not None


def test_denials_are_logged_in_kafkas_words_once_a_minute_and_counted(as_alice, caplog):
    checks = authz()
    with caplog.at_level(logging.INFO, logger="strom.authorizer"):
        for _ in range(100):
            assert checks.topics("Produce", ["payments"]) != {}
    lines = [r.getMessage() for r in caplog.records if r.name == "strom.authorizer"]
    assert lines == [
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.7 on resource = "
        "Topic:LITERAL:payments for request = Produce"
    ]
    assert checks.denied == {"WRITE": 100}


def test_listings_leave_out_what_may_not_be_described_silently(as_alice, caplog):
    checks = authz()
    with caplog.at_level(logging.INFO, logger="strom.authorizer"):
        visible = checks.visible_topics(["orders", "payments", "public-news"])
        groups = checks.visible_groups(["alices", "bobs"])
    assert visible == ["orders", "public-news"]
    assert groups == ["alices"]
    assert caplog.records == [] and checks.denied == {}
    token = enter(ADMIN)
    assert authz().visible_groups(["alices", "bobs"]) == ["alices", "bobs"]
    leave(token)


def test_creating_topics_needs_create_on_the_cluster_or_the_topic(as_alice):
    checks = authz(
        [
            *ACLS,
            allow(ResourceType.TOPIC, "alices-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
        ]
    )
    refused = checks.create_topics("CreateTopics", ["alices-1", "other"])
    assert list(refused) == ["other"]
    on_cluster = authz([allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE)])
    assert on_cluster.create_topics("Metadata", ["anything"]) == {}


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(as_alice):
    assert authz().init_producer_id("") is None  # WRITE on orders (Kafka 3+, KIP-679)
    refused = authz([]).init_producer_id("")
    assert refused is not None and refused.error_name == "CLUSTER_AUTHORIZATION_FAILED"
    idempotent = authz([allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE)])
    assert idempotent.init_producer_id("") is None
    transactional = authz().init_producer_id("tx-1")
    assert transactional is not None
    assert transactional.error_name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def run(
    checks: RequestAuthorizer, method: str, request: Any, on_controller: bool
) -> tuple[Any, list[Any]]:
    """authorized_call with a servicer that records what it was asked and answers it."""
    served: list[Any] = []

    async def serve(allowed: Any) -> Any:
        served.append(allowed)
        response = getattr(controller_pb2, f"{method}Response")()
        if method == "DeleteTopics":
            for n in allowed.names:
                response.topics.add(name=n)
        if method == "DescribeTopics":
            for n in ["orders", "payments"]:
                response.topics.add(name=n)
        if method == "CreateTopics":
            for t in allowed.topics:
                response.topics.add(name=t.name).configs.add(name="retention.ms", value="1")
        return response

    return asyncio.run(
        authorized_call(checks, method, request, serve, on_controller=on_controller)
    ), served


def test_controller_calls_refused_whole_do_nothing(as_alice):
    for method, request in [
        ("RegisterBroker", controller_pb2.RegisterBrokerRequest(broker_id=9)),
        ("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(want_shut_down=True)),
        ("AlterPartition", controller_pb2.AlterPartitionRequest()),
        ("ElectLeaders", controller_pb2.ElectLeadersRequest()),
        ("CreatePartitions", controller_pb2.CreatePartitionsRequest(name="orders", count=9)),
    ]:
        response, served = run(authz(), method, request, on_controller=True)
        assert served == [], method
        assert response.error.error.code != 0, method


def test_controller_calls_refused_in_part_serve_the_rest(as_alice):
    checks = authz([*ACLS, allow(ResourceType.TOPIC, "scratch", AclOperation.DELETE)])
    request = controller_pb2.DeleteTopicsRequest(names=["scratch", "__consumer_offsets"])
    response, served = run(checks, "DeleteTopics", request, on_controller=False)
    assert [list(r.names) for r in served] == [["scratch"]]
    assert {(t.name, t.error.code != 0) for t in response.topics} == {
        ("scratch", False),
        ("__consumer_offsets", True),
    }
    described, _ = run(
        checks, "DescribeTopics", controller_pb2.DescribeTopicsRequest(), on_controller=False
    )
    assert [t.name for t in described.topics] == ["orders"]  # payments left out, silently


def test_created_topics_configs_are_answered_only_to_who_may_describe_them(as_alice):
    """Kafka's CreateTopics v5+: a topic's configs need DESCRIBE_CONFIGS on it, else
    topic_config_error_code TOPIC_AUTHORIZATION_FAILED and no configs."""
    checks = authz(
        [
            *ACLS,
            allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE),
            allow(ResourceType.TOPIC, "seen", AclOperation.DESCRIBE_CONFIGS),
        ]
    )
    request = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name=n) for n in ("seen", "unseen")]
    )
    response, _ = run(checks, "CreateTopics", request, on_controller=False)
    results = {t.name: t for t in response.topics}
    assert [c.name for c in results["seen"].configs] == ["retention.ms"]
    assert not results["seen"].HasField("config_error")
    assert list(results["unseen"].configs) == []
    assert results["unseen"].config_error.code == common_pb2.TOPIC_AUTHORIZATION_FAILED


def test_a_controller_trusts_a_forwarding_broker_with_cluster_action():
    token = enter(BROKER)
    request = controller_pb2.DeleteTopicsRequest(names=["__consumer_offsets"])
    _, served = run(authz(), "DeleteTopics", request, on_controller=True)
    assert len(served) == 1  # the broker authorized its client already
    _, served = run(authz(), "DeleteTopics", request, on_controller=False)
    assert served == []  # a broker's own forwarder checks the caller itself
    leave(token)


def test_the_node_authorizer_follows_the_images_acls():
    node = NodeAuthorizer(AuthorizerSettings())
    first = node.current()
    assert first is not None
    node.on_image(EMPTY_IMAGE)  # no ACLs, as before: nothing rebuilt
    assert node.current() is first
    read = ("User:alice", "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "t")
    assert not first.authorize(*read)
    record = mpb.AccessControlEntryRecord(
        id=b"\x01" * 16,
        resource_type=ResourceType.TOPIC,
        resource_name="t",
        pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    )
    image = MetadataDelta(EMPTY_IMAGE).replay_all([record]).apply(1, 1)
    node.on_image(image)
    second = node.current()
    assert second is not first and second is not None
    assert second.authorize(*read)
    node.on_image(MetadataDelta(image).replay_all([]).apply(2, 1))  # ACLs unchanged
    assert node.current() is second
    assert NodeAuthorizer(None).current() is None


BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/tmp/strom-test",
}


def test_authorizer_class_name_is_kafkas_or_refused():
    assert from_properties(BASE).authorizer is None
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "StandardAuthorizer"):
        settings = from_properties(
            {**BASE, "authorizer.class.name": name, "super.users": "User:admin;User:broker"}
        ).authorizer
        assert settings is not None
        assert settings.super_users == {"User:admin", "User:broker"}
    with pytest.raises(InvalidConfigError, match="authorizer.class.name"):
        from_properties(
            {**BASE, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
        )


def test_configs_of_a_topic_need_the_topic_and_of_a_broker_the_cluster(as_alice):
    checks = authz([*ACLS, allow(ResourceType.TOPIC, "orders", AclOperation.ALTER_CONFIGS)])
    request = controller_pb2.DescribeConfigsRequest(
        resources=[
            controller_pb2.ConfigResource(type=mpb.TOPIC, name="orders"),
            controller_pb2.ConfigResource(type=mpb.BROKER, name="1"),
        ]
    )
    response, served = run(checks, "DescribeConfigs", request, on_controller=False)
    assert [[r.name for r in s.resources] for s in served] == [["orders"]]  # ALTER implies
    assert [(r.resource.name, r.error.code) for r in response.results] == [
        ("1", 31)  # CLUSTER_AUTHORIZATION_FAILED
    ]
