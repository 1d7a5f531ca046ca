"""The fuzz run of `make test` against a secured cluster (issue 18): every listener SASL_SSL
(tests/fuzz/secured.py), one fixed seed, every RPC of every service plus
SecurityService.SaslAuthenticate on both listeners. Each case is sent as the ordinary
SCRAM-SHA-512 user `fuzz` (as the plaintext run sends them), without a session, with a
session token replayed from another connection, or with a forged one (tests/fuzz/cases.py).
`make fuzz SECURED=1` runs more.

Kept short (a few hundred cases, about 30 s with the cluster): the plaintext run
(test_fuzz.py) covers the servicers' own robustness at length; this one is about what a
caller without credentials gets, and about the SASL exchange itself.
"""

from __future__ import annotations

import collections

import pytest

from tests.fuzz import run as fuzz
from tests.fuzz.cases import ANONYMOUS, FORGED, IDENTITIES, REPLAYED, USER, build
from tests.fuzz.sasl import sasl_stream
from tests.fuzz.seeds import missing
from tests.fuzz.services import catalogue
from tests.fuzz.values import Context

pytestmark = pytest.mark.fuzz

SEED = 20  # its 500 cases draw every RPC, identity and handshake kind (a test checks)
CASES = 500
BUDGET_S = 15.0
CTX = Context(
    {"t": 2},
    {"t": bytes(16)},
    ["g"],
    [1, 2, 3],
    tokens={
        (n, listener): "eyJ0b2tlbiI.c2lnbmF0dXJl"
        for n in (1, 2, 3)
        for listener in ("broker", "controller")
    },
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("fuzz-secured"))
    outcome = fuzz.run(
        base,
        SEED,
        CASES,
        isolate=False,
        max_recoveries=2,
        budget_s=BUDGET_S,
        echo=False,
        secured=True,
    )
    print(fuzz.format_result(outcome))
    return outcome


def findings(result, *kinds, rpc=None):
    found = [f for f in result.findings if f.kind in kinds and (rpc is None or rpc in f.where)]
    return "\n".join(str(f) for f in found)


# --- no cluster needed -------------------------------------------------------------------


def test_the_handshake_is_fuzzed_on_both_listeners_beside_every_rpc():
    rpcs = catalogue(secured=True)
    assert {(r.listener, r.method) for r in rpcs if r.service == "SecurityService"} == {
        ("broker", "SaslAuthenticate"),
        ("controller", "SaslAuthenticate"),
    }
    assert missing(rpcs) == []
    drawn = [build(SEED, n, rpcs, CTX) for n in range(CASES)]
    assert {c.rpc.name for c in drawn} == {r.name for r in rpcs}
    assert set(collections.Counter(c.identity for c in drawn)) == set(IDENTITIES)
    handshakes = [c for c in drawn if c.rpc.service == "SecurityService"]
    assert {c.kind for c in handshakes} >= {"sasl", "mutated", "random"}
    assert {c.identity for c in handshakes} == {ANONYMOUS}


def test_replayed_and_forged_cases_carry_a_token_and_others_none():
    rpcs = catalogue(secured=True)
    for number in range(300):
        case = build(SEED, number, rpcs, CTX)
        token = dict(case.metadata).get("strom-sasl-session")
        if case.identity == REPLAYED:
            assert token == CTX.tokens[(case.node, case.rpc.listener)]
        elif case.identity == FORGED:
            assert token is not None and token != CTX.tokens[(case.node, case.rpc.listener)]
        else:
            assert token is None


def test_plaintext_cases_are_as_they_were():
    """The secured run's draws come after the plaintext ones: a plaintext seed still
    replays the same cases."""
    rpcs = catalogue()
    plain = Context({"t": 2}, {"t": bytes(16)}, ["g"], [1, 2, 3])
    for number in (0, 5, 99):
        case = build(SEED, number, rpcs, plain)
        assert (case.identity, case.metadata) == ("", ())


def test_sasl_streams_cover_wrong_orders_and_absurd_sizes():
    import random

    from strom_api.v1 import security_pb2

    streams = [sasl_stream(random.Random(f"sasl:{i}")) for i in range(400)]
    assert any(s == [] for s in streams)
    messages = [security_pb2.SaslAuthenticateRequest.FromString(m) for s in streams for m in s]
    assert max(len(m.auth_bytes) for m in messages) > 524_288  # sasl.server.max.receive.size
    assert any(
        m.auth_bytes.startswith(b"c=")
        for s in streams
        for m in map(security_pb2.SaslAuthenticateRequest.FromString, s[:1])
    )  # a client-final first
    assert any(len(s) > 2 for s in streams)  # more messages than SCRAM's two


# --- the run -----------------------------------------------------------------------------


def test_the_run_exercised_the_cluster_with_every_identity(result):
    assert result.cases >= 200, fuzz.format_result(result)
    answers = result.answers
    refused = sum(n for k, n in answers.items() if k.endswith(" UNAUTHENTICATED"))
    served = sum(
        n
        for k, n in answers.items()
        if f" {USER} " in k and not k.endswith(("UNAUTHENTICATED", "refused"))
    )
    assert refused >= 50, answers
    assert served >= 50, answers  # the SCRAM user's calls reach the servicers


def test_every_call_without_a_valid_session_is_refused_unauthenticated(result):
    """Anonymous, replayed and forged callers, on every RPC but health and the handshake
    (RaftService.Exchange: the next test)."""
    found = [
        f
        for f in result.findings
        if f.kind == fuzz.UNAUTHENTICATED_SERVED and "RaftService" not in f.where
    ]
    assert not found, "\n".join(map(str, found))


def test_a_raft_stream_without_a_valid_session_is_refused_unauthenticated(result):
    assert not findings(result, fuzz.UNAUTHENTICATED_SERVED, rpc="RaftService")


def test_no_sasl_exchange_without_a_password_yields_a_session(result):
    assert not findings(result, fuzz.SESSION_GRANTED)


def test_no_node_exits(result):
    assert not findings(result, fuzz.CRASH)


def test_every_node_answers_health_within_a_second_and_keeps_a_quorum(result):
    assert not findings(result, fuzz.HANG, fuzz.QUORUM)


def test_a_refused_request_changes_no_topic(result):
    assert not findings(result, fuzz.STATE)


def test_every_stored_batch_decodes(result):
    assert not findings(result, fuzz.POISON)


def test_no_bad_request_logs_a_traceback(result):
    assert not findings(result, fuzz.TRACEBACK, fuzz.LOG_GROWTH)


def test_the_scram_user_round_trips_afterwards(result):
    assert not findings(result, fuzz.ROUND_TRIP)
