"""AdminClient's way to the controllers (internal to the client library; only the
reassign-partitions tool still uses it directly, docs/architecture.md §2): finds the active
controller and calls ControllerService (strom_api/v1/controller.proto) on it.

Controllers are named as Kafka 3.7+'s `--bootstrap-controller` names them, `host:port`, or as
`controller.quorum.voters` does, `id@host:port`. A call goes to the active controller as far
as this client knows it, then to every given address in turn. A standby answers
NOT_CONTROLLER with the active controller's id and address, and the client goes there next
(an id's address is also known when given as `id@host:port` or learnt from an earlier
answer); otherwise it keeps trying the given addresses.
While there is no active controller (an election), or when no address answers at all, it
retries with a short backoff: `timeout_s` in all once some controller answered, only
`unreachable_timeout_s` while none does. Other retriable errors are retried a few times;
anything else is the caller's StromError at once (strom/errors.py: the client's one error
family, kafka-python's classes for Kafka's names).

Descriptions (DescribeCluster, DescribeTopics) are answered by any controller from its own
image, which may trail the leader's; `describe` asks the active controller when there is one
(so a tool sees what the previous command just did) and any controller when there is none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc

from strom.errors import AuthenticationError, KafkaTimeoutError, StromError, from_pb
from strom_api.error_codes import ErrorCode
from strom_api.tls import ChannelSecurity, handshake_failure, refused_authentication, sync_channel
from strom_api.v1 import common_pb2, controller_pb2, controller_pb2_grpc

DEFAULT_TIMEOUT_S = 15.0  # an election (or a controller restart) fits well inside
DEFAULT_UNREACHABLE_TIMEOUT_S = 3.0  # nobody answering at all: say so soon
DEFAULT_RPC_TIMEOUT_S = 5.0
LEADERLESS_DESCRIBE_WAIT_S = 2.0  # how long `describe` looks for the active controller
RETRIABLE_ATTEMPTS = 3  # other retriable errors (REQUEST_TIMED_OUT, ...): tries in all
BACKOFF_S = 0.05
MAX_BACKOFF_S = 0.5

# gRPC statuses after which another controller (or a later try) may answer.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
}
# The controller failed the call itself (an exception in its servicer): said at once.
_SERVER_FAILURE = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
# Reconnect soon after a refused connection (gRPC's default backoff starts at 1 s).
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


@dataclass(frozen=True)
class ControllerAddress:
    host: str
    port: int
    node_id: int | None = None  # known when given as id@host:port

    @property
    def target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_bootstrap(text: str) -> list[ControllerAddress]:
    """`host:port[,host:port...]`, each optionally `id@host:port`; ValueError names a bad
    entry. IPv6 hosts are written in brackets, `[::1]:9093`."""
    addresses: list[ControllerAddress] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        node_id: int | None = None
        if "@" in entry:
            id_text, _, entry = entry.partition("@")
            try:
                node_id = int(id_text)
            except ValueError:
                raise ValueError(f"bad controller id in {raw.strip()!r}") from None
        host, sep, port_text = entry.rpartition(":")
        host = host.strip("[]") if host.startswith("[") else host
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"{raw.strip()!r} is not host:port")
        addresses.append(ControllerAddress(host, int(port_text), node_id))
    if not addresses:
        raise ValueError("no controller address given")
    return addresses


def _controller_error(response: Any) -> Any | None:
    """A response's ControllerError when it carries one (code other than NONE)."""
    if "error" not in response.DESCRIPTOR.fields_by_name or not response.HasField("error"):
        return None
    error = response.error
    return error if error.error.code != common_pb2.NONE else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _default_stub_factory(channel: grpc.Channel) -> Any:
    return controller_pb2_grpc.ControllerServiceStub(channel)  # type: ignore[no-untyped-call]


class ControllerClient:
    """One tool run's connection to the controllers; close it (or use it in a `with`)."""

    def __init__(
        self,
        addresses: Sequence[ControllerAddress],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        unreachable_timeout_s: float = DEFAULT_UNREACHABLE_TIMEOUT_S,
        rpc_timeout_s: float = DEFAULT_RPC_TIMEOUT_S,
        stub_factory: Callable[[grpc.Channel], Any] = _default_stub_factory,
        channel_factory: Callable[[str], grpc.Channel] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        tls: ChannelSecurity = None,
    ) -> None:
        """`tls`: the TLS to dial with (strom/security.py), None for PLAINTEXT."""
        if not addresses:
            raise ValueError("no controller address given")
        self.addresses = list(addresses)
        self.timeout_s = timeout_s
        self.unreachable_timeout_s = unreachable_timeout_s
        self.rpc_timeout_s = rpc_timeout_s
        self._stub_factory = stub_factory
        self.tls = tls
        self._channel_factory = channel_factory or (
            lambda target: sync_channel(target, tls, _CHANNEL_OPTIONS)
        )
        self._clock = clock
        self._sleep = sleep
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}
        # What this client has learnt: controller ids' addresses and the active controller.
        self._by_id: dict[int, ControllerAddress] = {
            a.node_id: a for a in self.addresses if a.node_id is not None
        }
        self._active: ControllerAddress | None = None
        self._not_controller: set[str] = set()  # addresses that answered they are a standby

    # --- the calls ---------------------------------------------------------------------------

    def call(self, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """`method` on the active controller; its answer, whatever its per-topic results.
        StromError when the answer is a ControllerError that retrying does not cure, or when
        no active controller answers in time."""
        clock = self._clock
        start = clock()
        deadline = start + (self.timeout_s if timeout_s is None else timeout_s)
        unreachable_deadline = start + min(self.unreachable_timeout_s, deadline - start)
        backoff = BACKOFF_S
        attempts_left = RETRIABLE_ATTEMPTS
        answered = False
        last: StromError | None = None  # the last transport failure
        retriable: StromError | None = None  # the last retriable error of the operation
        unsupported: dict[str, StromError] = {}
        while True:
            tried: set[str] = set()
            queue = self._order()
            named: int | None = None  # the active controller's id, as a standby named it
            retry_now = False
            while queue:
                address = queue.pop(0)
                if address.target in tried or address.target in unsupported:
                    continue
                tried.add(address.target)
                try:
                    response = self._invoke(address, method, request, deadline)
                except grpc.RpcError as exc:
                    error = self._transport_error(address, method, exc)
                    if exc.code() in _SERVER_FAILURE:
                        raise error from None
                    if exc.code() in _TRANSIENT:
                        last = error
                    else:
                        unsupported[address.target] = error
                    if self._active == address:
                        self._active = None
                    continue
                answered = True
                error_pb = _controller_error(response)
                if error_pb is None:
                    self._learn_active(address, named)
                    if method == "DescribeQuorum":
                        self._by_id[response.leader_id] = address
                    return response
                name = from_pb(error_pb.error).name
                if name == ErrorCode.NOT_CONTROLLER:
                    self._not_controller.add(address.target)
                    if self._active == address:
                        self._active = None
                    active_id = error_pb.active_controller_id
                    if active_id >= 0:
                        named = active_id
                        told = _parse_target(error_pb.active_controller_address, active_id)
                        if told is not None:
                            self._by_id.setdefault(active_id, told)
                        known = self._by_id.get(active_id)
                        if known is not None and known.target not in tried:
                            queue.insert(0, known)
                    continue
                if error_pb.error.retriable and attempts_left > 1:
                    attempts_left -= 1
                    retriable = from_pb(error_pb.error)
                    retry_now = True
                    break
                raise from_pb(error_pb.error)
            if len(unsupported) == len({a.target for a in self.addresses}) and not retry_now:
                raise next(iter(unsupported.values()))
            limit = deadline if answered else unreachable_deadline
            if clock() + backoff > limit:
                raise self._give_up(method, answered, last, retriable, start)
            self._sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def describe(self, method: str, request: Any) -> Any:
        """A description (DescribeCluster, DescribeTopics) from the active controller's
        image, or from any controller's when there is no active one."""
        if self._active is None:
            try:
                self.call(
                    "DescribeQuorum",
                    controller_pb2.DescribeQuorumRequest(),
                    timeout_s=min(self.timeout_s, LEADERLESS_DESCRIBE_WAIT_S),
                )
            except StromError as error:
                # Finding the active controller is only a preference: a principal without
                # DESCRIBE on the cluster (DescribeQuorum) still describes what it may.
                if error.name not in (
                    ErrorCode.NOT_CONTROLLER,
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                ):
                    raise
        deadline = self._clock() + self.rpc_timeout_s
        last: StromError | None = None
        for address in self._order():
            try:
                return self._invoke(address, method, request, deadline)
            except grpc.RpcError as exc:
                last = self._transport_error(address, method, exc)
        assert last is not None
        raise last

    # --- plumbing ----------------------------------------------------------------------------

    def _targets(self) -> str:
        return ",".join(a.target for a in self.addresses)

    def _order(self) -> list[ControllerAddress]:
        """The active controller first, then the given addresses, standbys last."""
        given = sorted(self.addresses, key=lambda a: a.target in self._not_controller)
        if self._active is not None:
            return [self._active, *given]
        return given

    def _learn_active(self, address: ControllerAddress, named: int | None) -> None:
        self._active = address
        self._not_controller.discard(address.target)
        if named is not None:
            self._by_id.setdefault(named, address)

    def _stub(self, address: ControllerAddress) -> Any:
        target = address.target
        if target not in self._stubs:
            channel = self._channel_factory(target)
            self._channels[target] = channel
            self._stubs[target] = self._stub_factory(channel)
        return self._stubs[target]

    def _invoke(
        self, address: ControllerAddress, method: str, request: Any, deadline: float
    ) -> Any:
        remaining = max(0.05, min(self.rpc_timeout_s, deadline - self._clock()))
        return getattr(self._stub(address), method)(request, timeout=remaining)

    def _transport_error(
        self, address: ControllerAddress, method: str, exc: grpc.RpcError
    ) -> StromError:
        code = exc.code()
        details = _one_line(exc.details() or "")
        refused = handshake_failure(details, self.tls)
        if refused is not None and refused_authentication(refused, self.tls, address.target):
            raise AuthenticationError(f"{refused} ({address.target})")
        if refused is not None:
            return _network_error(f"{address.target}: {refused}")
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return StromError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{address.target} does not serve ControllerService.{method}: is it a "
                "CONTROLLER listener?",
            )
        if code in _SERVER_FAILURE:
            return StromError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{address.target} failed {method}: {details}"
            )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return KafkaTimeoutError(f"{address.target} did not answer {method} in time.")
        return _network_error(f"{address.target}: {code.name}: {details}")

    def _give_up(
        self,
        method: str,
        answered: bool,
        last: StromError | None,
        retriable: StromError | None,
        start: float,
    ) -> StromError:
        waited = self._clock() - start
        if not answered:
            detail = f" Last error: {last.message}" if last is not None else ""
            return _network_error(
                f"No controller answered at {self._targets()} (tried for {waited:.1f} s).{detail}"
            )
        if retriable is not None:
            return retriable
        return StromError(  # only standbys answered
            ErrorCode.NOT_CONTROLLER,
            f"No active controller answered {method} within {waited:.1f} s: the quorum has no "
            f"leader, or the leader is not among {self._targets()}.",
            retriable=True,
        )

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _network_error(message: str) -> StromError:
    """Kafka's NetworkException: retriable, as later tries may reach a controller."""
    return StromError(ErrorCode.NETWORK_EXCEPTION, message, retriable=True)


def _parse_target(text: str, node_id: int) -> ControllerAddress | None:
    """The active controller's address a standby named (host:port), if it named one."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return ControllerAddress(host, int(port), node_id)
