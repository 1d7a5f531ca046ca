"""DescribeCluster, ElectLeaders, Alter/ListPartitionReassignments and DescribeQuorum through
the Kafka listener (issue 20): confluent-kafka's elect_leaders (librdkafka: ElectLeaders v2),
kafka-python's describe_cluster, elect_leaders, partition reassignments and
describe_metadata_quorum, raw frames for what the clients do not show; each change seen
through Strom's own AdminClient (gRPC)."""

from __future__ import annotations

import datetime
import sys

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from strom.admin import AdminClient, NewTopic
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.kafka_cluster import connect, decode_response, read_frame, request_frame
from tests.node_integration.node_cluster import wait_until

TIMEOUT = 20


@pytest.fixture(scope="module")
def strom_admin(cluster):
    with AdminClient(bootstrap(cluster)) as admin:
        admin.create_topics([NewTopic("moving", 1, replica_assignments={0: [1]})])
        yield admin


@pytest.fixture(scope="module")
def kafka_python(cluster):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap(), request_timeout_ms=TIMEOUT * 1000
    )
    yield admin
    admin.close()


def _raw(cluster, body, api_key: int, node: int = 1):
    with connect(f"{cluster.host[node]}:{cluster.kafka_port[node]}") as sock:
        sock.sendall(request_frame(body, 11))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    correlation_id, response = decode_response(frame, api_key, body.__version__)
    assert correlation_id == 11
    return response


def test_describe_cluster_lists_the_kafka_endpoints(cluster, kafka_python):
    described = kafka_python.describe_cluster()
    assert described["cluster_id"] == cluster.cluster_id
    assert sorted((b["broker_id"], b["host"], b["port"]) for b in described["brokers"]) == [
        (i, "127.0.0.1", cluster.kafka_port[i]) for i in cluster.ids
    ]
    assert described["controller_id"] in cluster.ids


def test_describe_cluster_v2_fenced_brokers_operations_and_endpoint_type(cluster):
    request_type = load_request_schema(60, 2)

    def describe(**fields):
        fields.setdefault("include_cluster_authorized_operations", False)
        fields.setdefault("endpoint_type", i8(1))
        fields.setdefault("include_fenced_brokers", False)
        return _raw(cluster, request_type(**fields), 60)

    plain = describe()
    assert plain.error_code == ErrorCode.none and len(plain.brokers) == 3
    assert not any(b.is_fenced for b in plain.brokers)
    assert plain.cluster_authorized_operations == -(2**31)
    with_fenced = describe(include_fenced_brokers=True)
    assert sorted(b.broker_id for b in with_fenced.brokers) == cluster.ids
    # without an authorizer every cluster operation is allowed: Kafka's bits 5, 7-12
    operations = describe(include_cluster_authorized_operations=True)
    assert operations.cluster_authorized_operations == sum(
        1 << op for op in (5, 7, 8, 9, 10, 11, 12)
    )
    controllers = describe(endpoint_type=i8(2))
    assert controllers.error_code == ErrorCode.unsupported_endpoint_type
    assert controllers.brokers == ()


def test_confluent_elect_leaders_answers_per_partition(cluster):
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    admin = ConfluentAdmin({"bootstrap.servers": cluster.kafka_bootstrap()})
    future = admin.elect_leaders(
        ElectionType.PREFERRED,
        [TopicPartition("orders", 0), TopicPartition("no-such-topic", 0)],
    )
    results = future.result(timeout=TIMEOUT)
    by_topic = {tp.topic: error for tp, error in results.items()}
    # the preferred replica leads already (a fresh cluster): nothing to elect
    assert by_topic["orders"].code() == KafkaError.ELECTION_NOT_NEEDED
    assert by_topic["no-such-topic"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_kafka_python_elect_leaders(cluster, kafka_python):
    response = kafka_python.elect_leaders(0, {"payments": [0]}, raise_errors=False)
    assert response.error_code == 0
    ((topic, ((partition, code, message),)),) = [
        (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
        for r in response.replica_election_results
    ]
    assert (topic, partition, code) == ("payments", 0, 84)  # ELECTION_NOT_NEEDED
    assert message == "Leader election not needed for topic partition."


def test_kafka_python_moves_a_partition_seen_through_grpc(cluster, kafka_python, strom_admin):
    from kafka import TopicPartition

    tp = TopicPartition("moving", 0)
    kafka_python.alter_partition_reassignments({tp: [2, 3]})

    def moved():
        (topic,) = strom_admin.describe_topics(["moving"])
        return topic.partitions[0].replicas == (2, 3) or None

    wait_until(moved, 30, "moving-0 to be on brokers 2 and 3")
    assert kafka_python.list_partition_reassignments() == {}


def test_a_reassignment_in_progress_is_listed_and_cancelled(cluster, strom_admin):
    """A target naming a broker that is down cannot complete: listed, then cancelled. The
    broker stopped is not the active controller, and every request goes to broker 1, so
    that nothing waits on an election or on the stopped broker's listener."""
    controller = strom_admin.describe_cluster()["controller_id"]
    down = next(n for n in (3, 2) if n != controller)
    strom_admin.create_topics([NewTopic("stuck", 1, replica_assignments={0: [1]})])
    request_type = load_request_schema(45, 1)
    module = __import__(request_type.__module__, fromlist=["ReassignableTopic"])

    def alter(replicas, allow=True):
        request = request_type(
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=TIMEOUT)),
            allow_replication_factor_change=allow,
            topics=(
                module.ReassignableTopic(
                    name="stuck",
                    partitions=(
                        module.ReassignablePartition(
                            partition_index=i32(0),
                            replicas=None if replicas is None else tuple(i32(r) for r in replicas),
                        ),
                    ),
                ),
            ),
        )
        response = _raw(cluster, request, 45)
        assert response.error_code == ErrorCode.none
        ((partition,),) = [t.partitions for t in response.responses]
        return partition.error_code, partition.error_message

    def listed():
        request = load_request_schema(46, 0)(
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=TIMEOUT)), topics=None
        )
        response = _raw(cluster, request, 46)
        assert response.error_code == ErrorCode.none
        return {
            (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics
            for p in t.partitions
        }

    code, message = alter([1, 2], allow=False)
    assert code == ErrorCode.invalid_replication_factor and "from 1 to 2" in message
    cluster.stop(down)
    try:
        assert alter([1, down]) == (ErrorCode.none, None)
        assert listed() == {("stuck", 0): ((1, down), (down,), ())}
        assert alter(None) == (ErrorCode.none, None)
        assert listed() == {}
        (topic,) = strom_admin.describe_topics(["stuck"])
        assert topic.partitions[0].replicas == (1,)
    finally:
        cluster.start(down)
        cluster.wait_for_brokers()


def test_describe_quorum_of_another_partition_is_unknown(cluster):
    request_type = load_request_schema(55, 2)
    module = __import__(request_type.__module__, fromlist=["TopicData"])
    request = request_type(
        topics=(
            module.TopicData(
                topic_name="orders", partitions=(module.PartitionData(partition_index=i32(0)),)
            ),
        )
    )
    response = _raw(cluster, request, 55)
    ((partition,),) = [t.partitions for t in response.topics]
    assert partition.error_code == ErrorCode.unknown_topic_or_partition


def test_describe_quorum(cluster, kafka_python):
    quorum = kafka_python.describe_metadata_quorum()
    ((topic, (partition,)),) = [(t["topic_name"], t["partitions"]) for t in quorum["topics"]]
    assert topic == "__cluster_metadata" and partition["error"] is None
    assert partition["leader_id"] in cluster.ids and partition["leader_epoch"] >= 1
    assert sorted(v["replica_id"] for v in partition["current_voters"]) == cluster.ids
    assert partition["high_watermark"] > 0
    assert quorum["nodes"] == []  # KIP-853's voter endpoints: not reported (cluster_admin.py)


def test_api_versions_advertises_the_cluster_apis_over_docs_ranges(cluster):
    """docs/kafka_protocol.md, "Strom serves": ElectLeaders 2, AlterPartitionReassignments
    0-1, ListPartitionReassignments 0, DescribeQuorum 2, DescribeCluster 2."""
    request = load_request_schema(18, 3)(client_software_name="t", client_software_version="1")
    ranges = {
        k.api_key: (k.min_version, k.max_version) for k in _raw(cluster, request, 18).api_keys
    }
    assert [ranges[k] for k in (43, 45, 46, 55, 60)] == [(2, 2), (0, 1), (0, 0), (2, 2), (2, 2)]


def test_alter_partition_reassignments_v0_cancels_nothing_in_progress(cluster):
    request_type = load_request_schema(45, 0)
    module = __import__(request_type.__module__, fromlist=["ReassignableTopic"])
    request = request_type(
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=TIMEOUT)),
        topics=(
            module.ReassignableTopic(
                name="payments",
                partitions=(module.ReassignablePartition(partition_index=i32(0), replicas=None),),
            ),
        ),
    )
    response = _raw(cluster, request, 45)
    ((partition,),) = [t.partitions for t in response.responses]
    assert partition.error_code == ErrorCode.no_reassignment_in_progress
    assert partition.error_message == "No partition reassignment is in progress."


def test_acl_apis_answer_security_disabled_without_an_authorizer(cluster):
    """As Kafka's AclApis on a cluster with no authorizer.class.name (this module's cluster
    has none): per creation, per filter, and for the whole description. The ACL APIs
    themselves are tested in test_security_admin.py."""
    filter_fields = dict(
        resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
        principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1),
    )  # fmt: skip
    described = _raw(cluster, load_request_schema(29, 3)(**filter_fields), 29)
    assert (described.error_code, described.error_message) == (
        ErrorCode.security_disabled,
        "No Authorizer is configured.",
    )
    assert described.resources == ()
    create_type = load_request_schema(30, 3)
    creation = sys.modules[create_type.__module__].AclCreation(
        resource_type=i8(2), resource_name="t", resource_pattern_type=i8(3),
        principal="User:alice", host="*", operation=i8(3), permission_type=i8(3),
    )  # fmt: skip
    created = _raw(cluster, create_type(creations=(creation,)), 30)
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.security_disabled, "No Authorizer is configured.")
    ]
    delete_type = load_request_schema(31, 3)
    deletion = sys.modules[delete_type.__module__].DeleteAclsFilter(**filter_fields)
    deleted = _raw(cluster, delete_type(filters=(deletion, deletion)), 31)
    assert [(r.error_code, r.matching_acls) for r in deleted.filter_results] == [
        (ErrorCode.security_disabled, ()),
        (ErrorCode.security_disabled, ()),
    ]
