"""The fuzz run of `make test`: one fixed seed against a real 3-node cluster, every RPC of
every service, then one test per property so that each fails on its own. `make fuzz` runs
more (python -m tests.fuzz).

Before issue 16's fixes a node hung every hundred cases or so (empty fetches, huge
CreateTopics/CreatePartitions, forged Raft epochs), poison batches were stored and every
bad request logged a traceback; each property below failed then. The run stops starting
cases after BUDGET_S of them (the cluster's start not counted), or after 4 recoveries from a
hung node, so that the suite stays near 30 s; a loaded 2-core machine gets through about 20
cases a second, so CASES is an upper bound that a fast machine reaches.
"""

from __future__ import annotations

import collections

import pytest

from tests.fuzz import run as fuzz
from tests.fuzz.cases import build
from tests.fuzz.seeds import missing
from tests.fuzz.services import catalogue
from tests.fuzz.values import Context

pytestmark = pytest.mark.fuzz

SEED = 16
CASES = 2000
BUDGET_S = 20.0


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("fuzz"))
    outcome = fuzz.run(
        base, SEED, CASES, isolate=False, max_recoveries=4, budget_s=BUDGET_S, echo=False
    )
    print(fuzz.format_result(outcome))
    return outcome


def findings(result, *kinds):
    found = [f for f in result.findings if f.kind in kinds]
    return "\n".join(str(f) for f in found)


# --- no cluster needed -------------------------------------------------------------------


def test_every_rpc_of_every_service_is_fuzzed_with_a_seed_request():
    rpcs = catalogue()
    services = {(r.listener, r.service) for r in rpcs}
    assert services == {
        ("broker", "ClientService"),
        ("broker", "ReplicaService"),
        ("broker", "ControllerService"),
        ("broker", "Health"),
        ("controller", "RaftService"),
        ("controller", "ControllerService"),
        ("controller", "Health"),
    }
    assert missing(rpcs) == []
    ctx = Context({"t": 2}, {"t": bytes(16)}, ["g"], [1, 2, 3])
    drawn = collections.Counter(build(SEED, n, rpcs, ctx).rpc.name for n in range(CASES))
    assert set(drawn) == {r.name for r in rpcs}


def test_a_case_is_rebuilt_from_its_seed_and_number_alone():
    rpcs = catalogue()
    ctx = Context({"t": 2}, {"t": bytes(16)}, ["g"], [1, 2, 3])
    for number in (0, 7, 1999):
        first, again = build(SEED, number, rpcs, ctx), build(SEED, number, rpcs, ctx)
        assert (first.rpc, first.node, first.kind, first.requests) == (
            again.rpc,
            again.node,
            again.kind,
            again.requests,
        )
    kinds = collections.Counter(build(SEED, n, rpcs, ctx).kind for n in range(CASES))
    assert set(kinds) == {"random", "mutated", "damaged", "batch", "raw"}


def test_no_sender_is_a_member_of_the_cluster():
    """Forged voters and replicas are the security issue's: every Raft message, replica
    fetch and broker registration the fuzzer sends names a non-member."""
    from strom_api.v1 import raft_pb2

    rpcs = [r for r in catalogue() if r.service == "RaftService"]
    ctx = Context({"t": 2}, {"t": bytes(16)}, ["g"], [1, 2, 3])
    for number in range(300):
        case = build(SEED, number, rpcs, ctx)
        for data in case.requests:
            try:
                message = raft_pb2.RaftMessage.FromString(data)
            except Exception:
                continue
            assert message.src not in ctx.members


def test_a_refusal_is_an_error_on_the_whole_request_or_on_every_item():
    import grpc

    from strom_api.v1 import client_pb2, common_pb2, controller_pb2
    from tests.fuzz.checks import verdict
    from tests.fuzz.services import Outcome

    rpcs = {r.method: r for r in catalogue() if r.listener == "broker"}

    def answer(method, response, code=grpc.StatusCode.OK):
        return verdict(rpcs[method], Outcome(code, "", [response.SerializeToString()], 0.0))

    def produced(*codes):
        return client_pb2.ProduceResponse(
            topics=[
                client_pb2.ProduceResponse.Topic(
                    name="t",
                    partitions=[
                        client_pb2.ProduceResponse.Partition(
                            partition=i, error=common_pb2.Error(code=c)
                        )
                        for i, c in enumerate(codes)
                    ],
                )
            ]
        )

    assert answer("Produce", produced(common_pb2.CORRUPT_MESSAGE)) == "refused"
    assert answer("Produce", produced(common_pb2.CORRUPT_MESSAGE, common_pb2.NONE)) == "accepted"
    assert answer("Produce", produced(common_pb2.REQUEST_TIMED_OUT)) == "unknown"
    assert answer("Produce", produced(), grpc.StatusCode.INVALID_ARGUMENT) == "refused"
    assert answer("Produce", produced(), grpc.StatusCode.DEADLINE_EXCEEDED) == "unknown"
    # A ProduceStream's acks=0 request is answered empty, whether appended or not (seed 16
    # case 1031: appended, beside three refused requests).
    stream = [client_pb2.ProduceResponse(), produced(common_pb2.CORRUPT_MESSAGE)]
    outcome = Outcome(grpc.StatusCode.OK, "", [r.SerializeToString() for r in stream], 0.0)
    assert verdict(rpcs["ProduceStream"], outcome) == "unknown"
    # A topic answered without an error field was deleted: the request took effect.
    deleted = controller_pb2.DeleteTopicsResponse(
        topics=[
            controller_pb2.DeleteTopicsResponse.Result(name="t"),
            controller_pb2.DeleteTopicsResponse.Result(
                name="u", error=common_pb2.Error(code=common_pb2.UNKNOWN_TOPIC_OR_PARTITION)
            ),
        ]
    )
    assert answer("DeleteTopics", deleted) == "accepted"
    refused = controller_pb2.CreatePartitionsResponse(
        error=controller_pb2.ControllerError(
            error=common_pb2.Error(code=common_pb2.INVALID_PARTITIONS)
        )
    )
    assert answer("CreatePartitions", refused) == "refused"


def test_tracebacks_are_counted_per_cause_with_the_rpcs_that_raised_them():
    from tests.fuzz.checks import tracebacks

    log = "".join(
        f"[t] ERROR grpc._cython.cygrpc: Unexpected [DecodeError] raised by servicer method "
        f"[/strom_api.v1.ClientService/{method}]\nTraceback (most recent call last):\n"
        f'  File "/x/server/client_service.py", line 12, in handle\n'
        f"google.protobuf.message.DecodeError: Error parsing message with type "
        f"'strom_api.v1.{method}Request': Wire format was corrupt\n"
        for method in ("Produce", "Fetch", "Produce")
    )
    rpcs: dict[str, set[str]] = {}
    found = tracebacks(log, rpcs)
    assert list(found.values()) == [3]
    (key,) = found
    assert key.startswith("client_service.py:handle: google.protobuf.message.DecodeError")
    assert rpcs[key] == {"ClientService/Produce", "ClientService/Fetch"}


def test_an_offset_unknown_in_one_snapshot_is_no_change_but_a_new_partition_is():
    """Partitions an accepted CreatePartitions added answer ListOffsets only once their
    leaders are elected, which may be after the next snapshot: no refused request made
    them. (Seed 16 once reported a refused Produce as having changed 103 such offsets.)"""
    from tests.fuzz.checks import differences

    before = {"t": (3, ()), "t-0": 5}
    assert differences(before, {"t": (3, ()), "t-0": 5, "t-2": 0}) == []
    assert differences(before, {"t": (3, ())}) == []
    assert differences(before, {"t": (3, ()), "t-0": 6}) == ["t-0: 5 -> 6"]
    assert differences(before, {"t": (4, ()), "t-0": 5, "t-3": 0}) == [
        "t: (3, ()) -> (4, ())",
        "t-3: None -> 0",
    ]


# --- the run -----------------------------------------------------------------------------


def test_the_run_exercised_the_cluster(result):
    assert result.cases >= 200, fuzz.format_result(result)


def test_no_node_exits(result):
    assert not findings(result, fuzz.CRASH)


def test_every_node_answers_health_within_a_second_and_keeps_a_quorum(result):
    assert not findings(result, fuzz.HANG, fuzz.QUORUM)


def test_a_refused_request_changes_no_topic(result):
    assert not findings(result, fuzz.STATE)


def test_every_stored_batch_decodes(result):
    assert not findings(result, fuzz.POISON)


def test_logs_grow_less_than_a_megabyte(result):
    assert not findings(result, fuzz.LOG_GROWTH)


def test_no_bad_request_logs_a_traceback(result):
    assert not findings(result, fuzz.TRACEBACK)


def test_a_normal_round_trip_works_afterwards(result):
    assert not findings(result, fuzz.ROUND_TRIP)
