"""Requests from an outside process that once froze, crashed or misled a node (issue 16),
against a real 3-node cluster: each is answered at once with Kafka's error name, changes
nothing it was not allowed to, and leaves the node serving."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strom.consumer import Consumer, TopicPartition
from strom_api.v1 import (
    client_pb2,
    controller_pb2,
    controller_pb2_grpc,
    replica_pb2,
    replica_pb2_grpc,
)
from tests.data_plane.data_client import DataClient, batch, error_name, produce_request
from tests.data_plane.test_client_api import create_topic, latest_offset
from tests.node_integration.node_cluster import running_cluster
from tests.raft_integration.process_cluster import wait_until

INT32_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # max.partitions: small, to see the cluster-wide limit applied (KIP-578).
    base = str(tmp_path_factory.mktemp("hostile"))
    with running_cluster(base, extra={"max.partitions": "200"}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    return DataClient({i: f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids})


# The bugs these tests keep out held a node for minutes or for good (one for 4 s: its own
# bound below). "At once" and "responsive" sit far below that and far above what two test
# clusters sharing a 2-core machine take: make test runs two files at a time.
AT_ONCE_S = 5
RESPONSIVE_S = 2.5


def health_latency(cluster, node: int) -> float:
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[node]}")
    stub = health_pb2_grpc.HealthStub(channel)
    start = time.monotonic()
    stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    return time.monotonic() - start


def test_a_fetch_naming_no_partition_is_answered_at_once(cluster, client):
    """It once spun the event loop for max_wait_ms (2^31-1: for good) and got the node fenced."""
    stub = client.stub(1)
    request = client_pb2.FetchRequest(max_wait_ms=INT32_MAX, min_bytes=1, max_bytes=1 << 20)
    start = time.monotonic()
    response = stub.Fetch(request, timeout=5)
    assert time.monotonic() - start < AT_ONCE_S
    assert len(response.topics) == 0
    # The stream form too, several requests on one stream.
    start = time.monotonic()
    answers = list(stub.FetchStream(iter([request] * 3), timeout=5))
    assert len(answers) == 3 and time.monotonic() - start < AT_ONCE_S
    assert health_latency(cluster, 1) < RESPONSIVE_S


def test_a_replica_fetch_naming_no_partition_is_answered_at_once(cluster, client):
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[2]}")
    stub = replica_pb2_grpc.ReplicaServiceStub(channel)
    request = replica_pb2.ReplicaFetchRequest(
        replica_id=99, max_wait_ms=INT32_MAX, min_bytes=1, max_bytes=1 << 20
    )
    start = time.monotonic()
    answers = list(stub.Fetch(iter([request] * 3), timeout=5))
    assert len(answers) == 3 and time.monotonic() - start < AT_ONCE_S
    assert health_latency(cluster, 2) < RESPONSIVE_S


def test_a_long_poll_is_bounded_and_does_not_hold_the_loop(cluster, client):
    create_topic(cluster, "longpoll")
    leader = client.leader("longpoll", 0)
    end = latest_offset(client, "longpoll")
    box = {}

    def poll():
        try:
            box["answer"] = client.fetch_raw(
                leader, "longpoll", 0, end, max_wait_ms=INT32_MAX, min_bytes=1
            )
        except grpc.RpcError as exc:
            box["error"] = exc

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert (
        health_latency(cluster, leader) < RESPONSIVE_S
    )  # the waiting fetch does not block the node
    answer = client.produce_raw(leader, "longpoll", 0, batch([b"wake"]))
    assert error_name(answer.error) == "NONE"
    thread.join(10)
    assert box["answer"].records, box


def test_a_partition_named_twice_in_a_produce_is_refused_and_not_written(cluster, client):
    """Both batches were once answered with the second's offset."""
    create_topic(cluster, "twice")
    leader = client.leader("twice", 0)
    before = latest_offset(client, "twice")
    request = client_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name="twice",
                partitions=[
                    client_pb2.ProduceRequest.Partition(partition=0, records=batch([b"a"])),
                    client_pb2.ProduceRequest.Partition(partition=0, records=batch([b"b"])),
                ],
            )
        ],
    )
    response = client.stub(leader).Produce(request, timeout=15)
    names = [error_name(p.error) for p in response.topics[0].partitions]
    assert names == ["INVALID_REQUEST", "INVALID_REQUEST"]
    assert latest_offset(client, "twice") == before


def test_a_partition_named_many_times_in_a_fetch_is_refused(cluster, client):
    """It once answered 1,000 copies of the same records."""
    create_topic(cluster, "many")
    leader = client.leader("many", 0)
    assert error_name(client.produce_raw(leader, "many", 0, batch([b"x" * 100])).error) == "NONE"
    partition = client_pb2.FetchRequest.Partition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1
    )
    request = client_pb2.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[client_pb2.FetchRequest.Topic(name="many", partitions=[partition] * 1000)],
    )
    response = client.stub(leader).Fetch(request, timeout=10)
    items = response.topics[0].partitions
    assert {error_name(p.error) for p in items} == {"INVALID_REQUEST"}
    assert sum(len(p.records) for p in items) == 0


def create_raw(cluster, name, partitions, rf=1):
    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=rf
            )
        ]
    )
    return cluster.call("CreateTopics", request).topics[0]


def test_a_billion_partitions_is_a_policy_violation_not_a_dead_controller(cluster, client):
    controller = cluster.active_controller()
    answer = create_raw(cluster, "billion", 10**9)
    assert error_name(answer.error) == "POLICY_VIOLATION", answer
    assert "Excessively large number of partitions" in answer.error.message
    assert cluster.active_controller() == controller
    answer = create_raw(cluster, "over-max-partitions", 300)
    assert error_name(answer.error) == "POLICY_VIOLATION", answer
    assert "max.partitions=200" in answer.error.message
    assert error_name(create_raw(cluster, "fine", 3).error) == "NONE"


def test_an_admin_request_naming_more_than_kafkas_records_per_operation_is_refused_at_once(
    cluster, client
):
    """Kafka's controller refuses a user operation of more than 10,000 records
    (MAX_RECORDS_PER_USER_OP): POLICY_VIOLATION, "Unable to perform excessively large batch
    operation.". Here a request naming more items is refused whole before any is looked
    at, through a broker as to the controller; 100,000 config resources once held the
    active controller's loop for seconds and moved the quorum's leadership."""
    many = 10_001
    tps = [controller_pb2.TopicPartition(topic="x", partition=p) for p in range(many)]
    Resource = controller_pb2.IncrementalAlterConfigsRequest.Resource
    requests = {
        "CreateTopics": controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(name=f"n{i}", num_partitions=1, replication_factor=1)
                for i in range(many)
            ]
        ),
        "DeleteTopics": controller_pb2.DeleteTopicsRequest(names=[f"n{i}" for i in range(many)]),
        "ElectLeaders": controller_pb2.ElectLeadersRequest(partitions=tps),
        "AlterPartitionReassignments": controller_pb2.AlterPartitionReassignmentsRequest(
            reassignments=[
                controller_pb2.AlterPartitionReassignmentsRequest.Reassignment(partition=tp)
                for tp in tps
            ]
        ),
        "IncrementalAlterConfigs": controller_pb2.IncrementalAlterConfigsRequest(
            resources=[
                Resource(resource=controller_pb2.ConfigResource(type=2, name=f"n{i}"))
                for i in range(many)
            ]
        ),
    }
    controller = cluster.active_controller()
    stub = controller_pb2_grpc.ControllerServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}")
    )
    for method, request in requests.items():
        for answer in (getattr(stub, method)(request, timeout=10), cluster.call(method, request)):
            assert error_name(answer.error.error) == "POLICY_VIOLATION", (method, answer.error)
            assert answer.error.error.message == (
                "Unable to perform excessively large batch operation."
            )
    assert cluster.active_controller() == controller
    assert "n0" not in {t.name for t in client.metadata().topics}  # nothing was created
    fewer = controller_pb2.DeleteTopicsRequest(names=[f"n{i}" for i in range(10_000)])
    answer = cluster.call("DeleteTopics", fewer)
    assert error_name(answer.error.error) == "NONE"
    assert {error_name(t.error) for t in answer.topics} == {"UNKNOWN_TOPIC_OR_PARTITION"}


def test_an_admin_request_over_grpcs_default_4_mib_reaches_the_controller(cluster, client):
    """The controller's listener takes requests up to socket.request.max.bytes, as the
    brokers' do: a broker forwards its clients' admin requests there (KIP-590). With gRPC's
    default 4 MiB, a 5 MB DescribeTopics was refused RESOURCE_EXHAUSTED, and a broker
    forwarding it sent it again until its 30 s deadline."""
    names = [f"{i:03d}" + "n" * 25_000 for i in range(200)]  # 5 MB of names
    request = controller_pb2.DescribeTopicsRequest(names=names)
    assert request.ByteSize() > 5_000_000
    limits = [
        ("grpc.max_send_message_length", 16 << 20),
        ("grpc.max_receive_message_length", 16 << 20),
    ]

    def stub(port: int) -> Any:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=limits)
        return controller_pb2_grpc.ControllerServiceStub(channel)

    start = time.monotonic()
    forwarded = stub(cluster.broker_port[1]).DescribeTopics(request, timeout=20)
    assert time.monotonic() - start < 10
    active = cluster.active_controller()
    direct = stub(cluster.controller_port[active]).DescribeTopics(request, timeout=20)
    for answer in (forwarded, direct):
        assert len(answer.topics) == 200
        assert {error_name(t.error) for t in answer.topics} == {"UNKNOWN_TOPIC_OR_PARTITION"}


def test_init_producer_id_bumps_only_ids_that_were_handed_out(cluster, client):
    """An id never issued was once answered (that id, epoch + 1)."""
    stub = client.stub(1)
    fresh = stub.InitProducerId(client_pb2.InitProducerIdRequest(producer_id=-1), timeout=10)
    assert error_name(fresh.error) == "NONE" and fresh.producer_epoch == 0
    again = stub.InitProducerId(
        client_pb2.InitProducerIdRequest(producer_id=fresh.producer_id, producer_epoch=0),
        timeout=10,
    )
    assert (again.producer_id, again.producer_epoch) == (fresh.producer_id, 1)
    forged = stub.InitProducerId(
        client_pb2.InitProducerIdRequest(producer_id=10**15, producer_epoch=5), timeout=10
    )
    assert error_name(forged.error) == "NONE"
    assert forged.producer_id != 10**15 and forged.producer_epoch == 0


def test_consumer_offsets_is_not_deleted_and_a_user_made_one_still_serves_groups(cluster, client):
    """A user once made __consumer_offsets with 1 partition (49 of 50 groups were then
    without a coordinator) or deleted it. Groups now use the topic's real partition count,
    as Kafka's coordinator does, and DeleteTopics refuses internal topics."""
    answer = create_raw(cluster, "__consumer_offsets", 1, rf=3)
    assert error_name(answer.error) == "NONE", answer
    create_topic(cluster, "grouped")
    bootstrap = ",".join(f"127.0.0.1:{cluster.broker_port[i]}" for i in cluster.ids)
    tp = TopicPartition("grouped", 0)
    for group in ("g-a", "g-b", "g-c", "g-d"):
        with Consumer(bootstrap_servers=bootstrap, group_id=group) as consumer:
            consumer.assign([tp])
            consumer.commit({tp: 5})
            assert consumer.committed(tp) == 5
    response = cluster.call(
        "DeleteTopics", controller_pb2.DeleteTopicsRequest(names=["__consumer_offsets"])
    )
    assert error_name(response.topics[0].error) == "INVALID_REQUEST"
    assert "internal topic" in response.topics[0].error.message
    assert client.metadata(["__consumer_offsets"]).topics[0].partitions


def test_an_unknown_alter_config_op_is_invalid_request_at_once(cluster):
    """It once raised ValueError (UNKNOWN), and the broker forwarding it retried every
    controller for 30 s."""
    op = controller_pb2.IncrementalAlterConfigsRequest.Op(name="retention.ms", op=7, value="5")
    request = controller_pb2.IncrementalAlterConfigsRequest(
        resources=[
            controller_pb2.IncrementalAlterConfigsRequest.Resource(
                resource=controller_pb2.ConfigResource(type=2, name="fine"),
                ops=[op],
            )
        ]
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[1]}")
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    start = time.monotonic()
    response = stub.IncrementalAlterConfigs(request, timeout=10)
    assert time.monotonic() - start < AT_ONCE_S
    assert error_name(response.results[0].error) == "INVALID_REQUEST"
    assert "Unknown operations type 7" in response.results[0].error.message


def test_malformed_requests_get_corrupt_message_and_one_log_line_per_cause(cluster, client):
    """Every malformed request once logged a full traceback (98,000 fuzzed requests grew one
    log from 61 KB to 15.6 MB) and answered UNKNOWN."""
    node = 3
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[node]}")
    methods = [
        "/strom_api.v1.ClientService/Produce",
        "/strom_api.v1.ClientService/Metadata",
        "/strom_api.v1.ClientService/JoinGroup",
        "/strom_api.v1.ControllerService/CreateTopics",
    ]
    log_before = len(cluster.log_text(node))
    for method in methods:
        call = channel.unary_unary(method)  # raw bytes both ways
        for _ in range(100):
            with pytest.raises(grpc.RpcError) as caught:
                call(b"\x0a\x05abc", timeout=5)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert caught.value.details().startswith("CORRUPT_MESSAGE")
    # A malformed message in the middle of a stream ends that stream only.
    stream = channel.stream_stream("/strom_api.v1.ClientService/FetchStream")
    good = client_pb2.FetchRequest(max_wait_ms=0).SerializeToString()
    with pytest.raises(grpc.RpcError) as caught:
        list(stream(iter([good, b"\xff\xff\xff"]), timeout=5))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    time.sleep(0.3)
    grown = cluster.log_text(node)[log_before:]
    assert grown.count("malformed") <= len(methods) + 1, grown
    assert "Traceback" not in grown
    assert health_latency(cluster, node) < RESPONSIVE_S
    assert client.metadata(broker=node).brokers


def test_a_malformed_request_after_a_produce_on_a_stream_ends_it_with_corrupt_message(
    cluster, client
):
    """Found by tests/fuzz (seed 58): ProduceStream reads ahead in a task of its own, which
    aborted the call while the answer to the request before was being written; the two
    raced (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS, a traceback) and 5 streams in 200 hung
    until their deadline. The call is now aborted by its own task, between writes."""
    create_topic(cluster, "streamed", partitions=1)
    leader = client.leader("streamed", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{cluster.broker_port[leader]}")
    stream = channel.stream_stream("/strom_api.v1.ClientService/ProduceStream")
    good = produce_request("streamed", 0, batch([b"x"]), acks=1).SerializeToString()
    log_before = len(cluster.log_text(leader))
    ends = collections.Counter()
    for _ in range(200):
        with pytest.raises(grpc.RpcError) as caught:
            list(stream(iter([good, b"\xff\xff\xff"]), timeout=5))
        ends[caught.value.code(), caught.value.details().split(":")[0]] += 1
    assert ends == {(grpc.StatusCode.INVALID_ARGUMENT, "CORRUPT_MESSAGE"): 200}, ends
    assert "Traceback" not in cluster.log_text(leader)[log_before:]


def test_offset_commits_to_unknown_partitions_or_with_huge_metadata_are_refused(cluster, client):
    """Kafka's checks: a commit names partitions that exist, with metadata of at most
    offset.metadata.max.bytes (4096); else made-up names fill the coordinator's memory."""
    create_topic(cluster, "committed", partitions=2)
    for partition in (0, 1):
        client.leader("committed", partition)  # known to every broker
    coordinator = wait_until(
        lambda: _coordinator(client, "strict-group"), 30, "a coordinator for strict-group"
    )
    P = client_pb2.OffsetCommitRequest.Partition
    request = client_pb2.OffsetCommitRequest(
        group_id="strict-group",
        generation_id=-1,
        topics=[
            client_pb2.OffsetCommitRequest.Topic(
                name="committed",
                partitions=[P(partition=0, committed_offset=1), P(partition=7, committed_offset=1)],
            ),
            client_pb2.OffsetCommitRequest.Topic(
                name="made-up", partitions=[P(partition=0, committed_offset=1)]
            ),
            client_pb2.OffsetCommitRequest.Topic(
                name="committed",
                partitions=[P(partition=1, committed_offset=2, committed_metadata="m" * 5000)],
            ),
        ],
    )

    def commit():  # again until the coordinator's metadata has the new topic too
        response = client.stub(coordinator).OffsetCommit(request, timeout=15)
        names = [error_name(p.error) for t in response.topics for p in t.partitions]
        return names if names[0] == "NONE" else None

    names = wait_until(commit, 20, "the coordinator to know the topic")
    assert names == [
        "NONE",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "OFFSET_METADATA_TOO_LARGE",
    ]
    fetched = client.stub(coordinator).OffsetFetch(
        client_pb2.OffsetFetchRequest(group_id="strict-group"), timeout=10
    )
    committed = {
        (t.name, p.partition): p.committed_offset for t in fetched.topics for p in t.partitions
    }
    assert committed == {("committed", 0): 1}


def test_an_offset_commit_too_large_for_one_batch_is_invalid_commit_offset_size(cluster, client):
    """One commit's records are one batch of __consumer_offsets. A commit naming more
    partitions than its max.message.bytes could hold is refused whole before any partition
    is looked at (30,000 here: at least 1.4 MB); one whose metadata makes the batch too
    large is refused as Kafka maps the write's MESSAGE_TOO_LARGE. Nothing is committed, and
    the node stays responsive."""
    create_topic(cluster, "big-commit", partitions=2)
    client.leader("big-commit", 0)
    group = "too-large-group"
    coordinator = wait_until(lambda: _coordinator(client, group), 30, "a coordinator")
    stub = client.stub(coordinator)
    P = client_pb2.OffsetCommitRequest.Partition
    many = client_pb2.OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        topics=[
            client_pb2.OffsetCommitRequest.Topic(
                name="big-commit", partitions=[P(partition=0, committed_offset=1)] * 30_000
            )
        ],
    )
    response = stub.OffsetCommit(many, timeout=15)
    assert error_name(response.error) == "INVALID_COMMIT_OFFSET_SIZE"
    assert "max.message.bytes (1048588)" in response.error.message
    assert len(response.topics) == 0
    assert health_latency(cluster, coordinator) < RESPONSIVE_S

    heavy = client_pb2.OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        topics=[
            client_pb2.OffsetCommitRequest.Topic(
                name="big-commit",
                partitions=[
                    P(partition=p % 2, committed_offset=5, committed_metadata="m" * 4000)
                    for p in range(300)
                ],
            )
        ],
    )

    def commit():  # again until the coordinator's metadata has the new topic too
        answer = stub.OffsetCommit(heavy, timeout=15)
        names = {error_name(p.error) for t in answer.topics for p in t.partitions}
        return (answer, names) if "UNKNOWN_TOPIC_OR_PARTITION" not in names else None

    answer, names = wait_until(commit, 20, "the coordinator to know the topic")
    assert error_name(answer.error) == "INVALID_COMMIT_OFFSET_SIZE", answer
    assert names == {"INVALID_COMMIT_OFFSET_SIZE"}
    fetched = stub.OffsetFetch(client_pb2.OffsetFetchRequest(group_id=group), timeout=10)
    assert [p for t in fetched.topics for p in t.partitions] == []


def _coordinator(client, group):
    answer = client.stub(1).FindCoordinator(
        client_pb2.FindCoordinatorRequest(key=group), timeout=10
    )
    return answer.node_id if error_name(answer.error) == "NONE" else None


def test_validating_millions_of_records_does_not_stall_the_node(cluster, client):
    """Every produced record is validated (log_validator); a request of four zstd batches of
    a million empty records each would hold the event loop for seconds, and with it Raft,
    heartbeats and health. Large batches are validated in a worker thread."""
    from strom_api import compression
    from strom_api.records import Record, encode_batch

    create_topic(cluster, "dense", min_insync_replicas="1")
    leader = client.leader("dense", 0)
    now = int(time.time() * 1000)
    one = encode_batch(
        [Record(i, now, None, None) for i in range(1_000_000)],
        compression_codec=compression.ZSTD,
    )
    request = client_pb2.ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name="dense",
                partitions=[client_pb2.ProduceRequest.Partition(partition=0, records=one * 4)],
            )
        ],
    )
    box = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("answer", client.stub(leader).Produce(request, timeout=60))
    )
    thread.start()
    latencies = []
    while thread.is_alive():
        latencies.append(health_latency(cluster, leader))
        time.sleep(0.05)
    thread.join()
    answer = box["answer"].topics[0].partitions[0]
    assert error_name(answer.error) == "NONE", answer
    assert max(latencies) < RESPONSIVE_S, max(latencies)
    wait_until(lambda: latest_offset(client, "dense") == 4_000_000, 30, "the records replicated")


def test_a_string_past_kafkas_limit_makes_a_request_malformed(cluster, client):
    """Found by tests/fuzz (seed 1, case 2580): a Fetch of 42,000 partitions under a
    megabyte-long topic name held the node's event loop for minutes (protobuf decodes the
    name anew at each read). Strings keep Kafka's int16 length bound."""
    partition = client_pb2.FetchRequest.Partition(partition=0, fetch_offset=0)
    request = client_pb2.FetchRequest(
        topics=[
            client_pb2.FetchRequest.Topic(name="n" * 1_000_000, partitions=[partition] * 42_000)
        ]
    )
    start = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        client.stub(2).Fetch(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "32767-byte string limit" in caught.value.details()
    assert time.monotonic() - start < AT_ONCE_S
    assert health_latency(cluster, 2) < RESPONSIVE_S
    # Many partitions under a legal name are answered, and soon.
    request.topics[0].name = "no-such-topic"
    start = time.monotonic()
    answer = client.stub(2).Fetch(request, timeout=10)
    assert {error_name(p.error) for p in answer.topics[0].partitions} == {"INVALID_REQUEST"}
    assert time.monotonic() - start < AT_ONCE_S


def test_a_heartbeat_naming_a_topic_id_that_is_no_uuid_is_invalid_request_at_once(cluster):
    """Found by tests/fuzz (seed 57, case 469): 60,000 offline replicas under a 40 KB topic
    id, the id read (and copied, and hashed) once per partition, held the controller's
    loop for 4 s before the unregistered broker was refused. A topic id is a UUID's 16
    bytes; anything else is refused before any replica is looked at, changing nothing."""
    Offline = controller_pb2.BrokerHeartbeatRequest.OfflineReplicas
    for topic_id, partitions in ((bytes(17), [0]), (b"i" * 40_000, list(range(60_000)))):
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=INT32_MAX,
            broker_epoch=1,
            offline_replicas=[
                Offline(topic_id=bytes(16), partitions=[1]),
                Offline(topic_id=topic_id, partitions=partitions),
            ],
        )
        start = time.monotonic()
        answer = cluster.call("BrokerHeartbeat", request)
        assert time.monotonic() - start < 2
        assert error_name(answer.error.error) == "INVALID_REQUEST", answer.error
        assert f"a topic id of {len(topic_id)} bytes" in answer.error.error.message
    # Well-formed, the same unregistered broker is refused as before.
    request.offline_replicas[1].topic_id = bytes(16)
    answer = cluster.call("BrokerHeartbeat", request)
    assert error_name(answer.error.error) == "BROKER_ID_NOT_REGISTERED", answer.error
    assert health_latency(cluster, cluster.active_controller()) < RESPONSIVE_S


def test_a_client_cannot_append_to_an_internal_topic(cluster, client):
    """Found by the Kafka-protocol probe: a Produce to __consumer_offsets was written, and
    the group coordinator failed on the stranger's record each time it loaded the partition
    (unknown key version). Kafka's ReplicaManager refuses clients' appends to internal
    topics with INVALID_TOPIC_EXCEPTION; both front ends go through this path."""
    made = create_raw(cluster, "__consumer_offsets", 1, rf=3)  # unless a group made it
    assert error_name(made.error) in ("NONE", "TOPIC_ALREADY_EXISTS"), made
    wait_until(lambda: client.leader("__consumer_offsets", 0) or None, 10, "a leader")
    end_before = latest_offset(client, "__consumer_offsets", 0)
    answer = client.produce_raw(1, "__consumer_offsets", 0, batch([b"v"]))
    assert error_name(answer.error) == "INVALID_TOPIC_EXCEPTION", answer.error
    assert answer.error.message == "Cannot append to internal topic __consumer_offsets"
    assert latest_offset(client, "__consumer_offsets", 0) == end_before
