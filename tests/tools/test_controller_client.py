"""The admin client finds the active controller: NOT_CONTROLLER is followed when the active
controller's address is known, every given address is tried otherwise, elections and
unreachable controllers are retried for a while and then named in one clear error. Fake
stubs and a fake clock: no network, no waiting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from strom.controller_client import RETRIABLE_ATTEMPTS, ControllerClient, parse_bootstrap
from strom.errors import ClusterAuthorizationFailedError, KafkaTimeoutError, StromError
from strom_api.v1 import common_pb2
from strom_api.v1 import controller_pb2 as cpb


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def not_controller(active: int = -1, address: str = "") -> cpb.ControllerError:
    return cpb.ControllerError(
        error=common_pb2.Error(code=common_pb2.NOT_CONTROLLER, message="standby", retriable=True),
        active_controller_id=active,
        active_controller_address=address,
    )


# What a fake controller does with a request: an answer, or an exception to raise.
Behaviour = Callable[[str, Any], Any]


def leader(node: int) -> Behaviour:
    def answer(method: str, request: Any) -> Any:
        if method == "DescribeQuorum":
            return cpb.DescribeQuorumResponse(leader_id=node, leader_epoch=3)
        if method == "DescribeCluster":
            return cpb.DescribeClusterResponse(cluster_id=f"from-{node}", controller_id=node)
        return cpb.CreatePartitionsResponse()

    return answer


def standby(active: int = -1, node: int = 0) -> Behaviour:
    def answer(method: str, request: Any) -> Any:
        if method == "DescribeQuorum":
            return cpb.DescribeQuorumResponse(error=not_controller(active))
        if method == "DescribeCluster":
            return cpb.DescribeClusterResponse(cluster_id=f"from-{node}", controller_id=active)
        return cpb.CreatePartitionsResponse(error=not_controller(active))

    return answer


def down(code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> Behaviour:
    def answer(method: str, request: Any) -> Any:
        raise FakeRpcError(code, "connection refused")

    return answer


class Controllers:
    """Fake controllers by address, a log of calls, and a clock that sleeping advances."""

    def __init__(self, behaviours: dict[str, Behaviour]) -> None:
        self.behaviours = behaviours
        self.calls: list[tuple[str, str]] = []
        self.now = 0.0
        self.sleeps: list[float] = []

    def client(self, bootstrap: str, **kw: Any) -> ControllerClient:
        controllers = self

        class Stub:
            def __init__(self, target: str) -> None:
                self.target = target

            def __getattr__(self, method: str) -> Callable[..., Any]:
                def rpc(request: Any, timeout: float) -> Any:
                    controllers.calls.append((self.target, method))
                    return controllers.behaviours[self.target](method, request)

                return rpc

        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.now += seconds

        return ControllerClient(
            parse_bootstrap(bootstrap),
            channel_factory=lambda target: target,  # type: ignore[arg-type,return-value]
            stub_factory=Stub,
            clock=lambda: self.now,
            sleep=sleep,
            **kw,
        )

    def targets(self, method: str | None = None) -> list[str]:
        return [t for t, m in self.calls if method is None or m == method]


CREATE = cpb.CreatePartitionsRequest(name="t", count=2)


def test_goes_straight_to_the_named_active_controller_when_its_address_is_known() -> None:
    fake = Controllers({"a:1": standby(active=3), "b:1": standby(active=3), "c:1": leader(3)})
    client = fake.client("1@a:1,2@b:1,3@c:1")
    client.call("CreatePartitions", CREATE)
    assert fake.targets() == ["a:1", "c:1"]  # b is skipped: a named 3, whose address is c


def test_goes_straight_to_the_address_a_standby_names() -> None:
    def standby_naming(method: str, request: Any) -> Any:
        return cpb.CreatePartitionsResponse(error=not_controller(3, "c:1"))

    fake = Controllers({"a:1": standby_naming, "b:1": down(), "c:1": leader(3)})
    client = fake.client("a:1,b:1")  # c is not even among the given addresses
    client.call("CreatePartitions", CREATE)
    assert fake.targets() == ["a:1", "c:1"]


def test_tries_every_given_address_when_the_active_ones_is_unknown() -> None:
    fake = Controllers({"a:1": standby(active=3), "b:1": down(), "c:1": leader(3)})
    client = fake.client("a:1,b:1,c:1")
    client.call("CreatePartitions", CREATE)
    assert fake.targets() == ["a:1", "b:1", "c:1"]
    assert fake.sleeps == []
    # Learnt: the active controller is asked first from now on.
    fake.calls.clear()
    client.call("CreatePartitions", CREATE)
    assert fake.targets() == ["c:1"]


def test_an_election_is_waited_out() -> None:
    fake = Controllers({"a:1": standby(), "b:1": standby()})
    client = fake.client("a:1,b:1", timeout_s=10)
    rounds = 0

    def elected_on_third_round(method: str, request: Any) -> Any:
        nonlocal rounds
        rounds += 1
        return standby()(method, request) if rounds < 3 else leader(2)(method, request)

    fake.behaviours["b:1"] = elected_on_third_round
    assert client.call("CreatePartitions", CREATE) == cpb.CreatePartitionsResponse()
    assert len(fake.sleeps) == 2


def test_no_active_controller_in_time_is_not_controller() -> None:
    fake = Controllers({"a:1": standby(), "b:1": standby()})
    client = fake.client("a:1,b:1", timeout_s=5)
    with pytest.raises(StromError) as info:
        client.call("CreatePartitions", CREATE)
    assert info.value.name == "NOT_CONTROLLER"
    assert "no leader" in info.value.message and "a:1,b:1" in info.value.message
    assert 4 <= fake.now <= 5


def test_nothing_answering_is_a_network_error_after_the_short_timeout() -> None:
    fake = Controllers({"a:1": down(), "b:1": down()})
    client = fake.client("a:1,b:1", timeout_s=15, unreachable_timeout_s=3)
    with pytest.raises(StromError) as info:
        client.call("CreatePartitions", CREATE)
    assert info.value.name == "NETWORK_EXCEPTION"
    assert "No controller answered at a:1,b:1" in info.value.message
    assert "connection refused" in info.value.message
    assert fake.now <= 3


def test_an_address_that_is_not_a_controller_fails_at_once() -> None:
    fake = Controllers({"a:1": down(grpc.StatusCode.UNIMPLEMENTED)})
    with pytest.raises(StromError) as info:
        fake.client("a:1").call("CreatePartitions", CREATE)
    assert info.value.name == "UNSUPPORTED_VERSION"
    assert "CONTROLLER listener" in info.value.message
    assert fake.sleeps == []


def test_an_operations_own_error_is_returned_at_once() -> None:
    refused = cpb.CreatePartitionsResponse(
        error=cpb.ControllerError(
            error=common_pb2.Error(code=common_pb2.INVALID_PARTITIONS, message="Topic already")
        )
    )
    fake = Controllers({"a:1": lambda method, request: refused})
    with pytest.raises(StromError) as info:
        fake.client("a:1").call("CreatePartitions", CREATE)
    assert (info.value.name, info.value.message) == ("INVALID_PARTITIONS", "Topic already")
    assert fake.sleeps == []


def test_other_retriable_errors_are_retried_a_few_times() -> None:
    timed_out = cpb.CreatePartitionsResponse(
        error=cpb.ControllerError(
            error=common_pb2.Error(
                code=common_pb2.REQUEST_TIMED_OUT, message="slow", retriable=True
            )
        )
    )
    fake = Controllers({"a:1": lambda method, request: timed_out})
    with pytest.raises(StromError) as info:
        fake.client("a:1").call("CreatePartitions", CREATE)
    assert info.value.name == "REQUEST_TIMED_OUT"
    assert len(fake.calls) == RETRIABLE_ATTEMPTS


def test_descriptions_come_from_the_active_controllers_image() -> None:
    fake = Controllers({"a:1": standby(active=2, node=1), "b:1": leader(2)})
    client = fake.client("a:1,b:1")
    assert client.describe("DescribeCluster", cpb.DescribeClusterRequest()).cluster_id == "from-2"
    assert fake.targets("DescribeCluster") == ["b:1"]


def test_descriptions_come_from_any_controller_while_there_is_no_leader() -> None:
    fake = Controllers({"a:1": down(), "b:1": standby(node=2)})
    client = fake.client("a:1,b:1")
    described = client.describe("DescribeCluster", cpb.DescribeClusterRequest())
    assert (described.cluster_id, described.controller_id) == ("from-2", -1)


def test_a_controller_failing_the_call_is_said_at_once() -> None:
    fake = Controllers({"a:1": down(grpc.StatusCode.UNKNOWN), "b:1": leader(2)})
    with pytest.raises(StromError) as info:
        fake.client("a:1,b:1").call("CreatePartitions", CREATE)
    assert info.value.name == "UNKNOWN_SERVER_ERROR"
    assert fake.targets() == ["a:1"]


def test_a_dead_leader_named_by_the_standbys_ends_as_not_controller() -> None:
    fake = Controllers({"a:1": down(), "b:1": standby(active=1), "c:1": standby(active=1)})
    client = fake.client("1@a:1,2@b:1,3@c:1", timeout_s=3)
    with pytest.raises(StromError) as info:
        client.call("CreatePartitions", CREATE)
    assert info.value.name == "NOT_CONTROLLER"
    # Each round: the dead leader once, each standby once (the named leader is not retried).
    first_round = fake.targets()[:3]
    assert sorted(first_round) == ["a:1", "b:1", "c:1"]


# One error family (issue 19): the admin stack raises the client's StromError classes, as
# kafka-python's KafkaAdminClient raises kafka.errors', never an admin-only exception.


def test_a_refusal_by_the_authorizer_is_kafka_pythons_authorization_error() -> None:
    refused = cpb.CreatePartitionsResponse(
        error=cpb.ControllerError(
            error=common_pb2.Error(
                code=common_pb2.CLUSTER_AUTHORIZATION_FAILED, message="no ALTER on the cluster"
            )
        )
    )
    fake = Controllers({"a:1": lambda method, request: refused})
    with pytest.raises(ClusterAuthorizationFailedError) as info:
        fake.client("a:1").call("CreatePartitions", CREATE)
    assert info.value.name == "CLUSTER_AUTHORIZATION_FAILED"
    assert not info.value.retriable


def test_transport_failures_say_they_are_retriable_as_kafkas_exceptions_do() -> None:
    fake = Controllers({"a:1": down()})
    with pytest.raises(StromError) as info:
        fake.client("a:1", timeout_s=1, unreachable_timeout_s=1).call("CreatePartitions", CREATE)
    assert (info.value.name, info.value.retriable) == ("NETWORK_EXCEPTION", True)

    def quorum_only(method: str, request: Any) -> Any:
        if method == "DescribeQuorum":
            return leader(1)(method, request)
        raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED)

    slow = Controllers({"a:1": quorum_only})
    with pytest.raises(KafkaTimeoutError) as timed_out:
        slow.client("a:1").describe("DescribeCluster", cpb.DescribeClusterRequest())
    assert (timed_out.value.name, timed_out.value.retriable) == ("REQUEST_TIMED_OUT", True)
