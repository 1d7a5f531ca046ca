"""The Kafka wire-protocol fuzz run of `make test`: one fixed seed against a real 3-node
cluster with KAFKA listeners, well-formed requests of every served API among the mutated
and malformed ones, then one test per property so that each fails on its own.
`make kafka-fuzz` runs more (python -m tests.kafka_fuzz).

The fuzzer's prototype found what server/kafka/frame_bounds.py and the handlers now refuse
or survive: a 20-byte Metadata request whose topics count was the varint ff ff ff ff 7f made
kio reserve 274 GB and aborted the node; nulls in nullable fields raised TypeError in
handlers; a 32,767-byte topic name quoted in an error message made a response that could
not be encoded. With frame_bounds.check_body skipped this run fails: nodes abort
("memory allocation of 34359738352 bytes failed") and well-formed requests with unknown
tagged fields are closed.

Its first runs found, and the listener now survives: a JoinGroup v0-3 whose 32,767-byte
client id made a member id too long to encode; a Metadata naming one topic 112,500 times and
a DescribeProducers of 69,230 partitions that held the node's loop for seconds; an
OffsetCommit whose retention_time kio could not read; a Fetch answer with a null array that
could not be encoded (a regression it caught within the hour). SEED draws no frame of tens
of thousands of items in its first CASES cases, which keeps the run at 10 to 20 s on a
2-core machine (BUDGET_S stops a slower one sooner); `make kafka-fuzz` draws them.
"""

from __future__ import annotations

import collections
import datetime
import io
import random
import struct
import sys
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from server.kafka.apis import SERVED
from tests.kafka_fuzz import checks
from tests.kafka_fuzz import run as fuzz
from tests.kafka_fuzz.cases import Case, Frame, build, served
from tests.kafka_fuzz.cluster import DATA_TOPICS, OFFSETS_TOPIC, VICTIM, context
from tests.kafka_fuzz.connection import CLOSED, DEADLINE, Exchange, request_frame
from tests.kafka_fuzz.seeds import well_formed
from tests.kafka_fuzz.wire import encode, header, join, pieces

pytestmark = pytest.mark.fuzz

SEED = 3348
CASES = 500
BUDGET_S = 30.0

# The run's cluster's shape, with made-up ids and leaders: its cases are the run's.
CTX = context(
    {name: uuid.UUID(int=i + 1) for i, name in enumerate([*DATA_TOPICS, VICTIM, OFFSETS_TOPIC])},
    {("fuzz-a", 0): 1, ("fuzz-a", 1): 2, ("fuzz-a", 2): 3, ("fuzz-b", 0): 2},
    (1, 2, 3),
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("kafka-fuzz"))
    outcome = fuzz.run(base, SEED, CASES, max_recoveries=4, budget_s=BUDGET_S, echo=False)
    print(fuzz.format_result(outcome))
    return outcome


def findings(result, *kinds):
    return "\n".join(str(f) for f in result.of_kind(*kinds))


# --- no cluster needed -------------------------------------------------------------------


def test_the_encoder_writes_what_kio_writes_for_every_served_api_and_version():
    for api_key, version in served():
        for n in range(3):
            request = well_formed(
                random.Random(f"{api_key}:{version}:{n}"), api_key, version, CTX
            ).request
            out = io.BytesIO()
            entity_writer(type(request))(out, request)
            assert join(pieces(request)) == encode(request) == out.getvalue(), (api_key, version)
        head = header(api_key, version, 7, "c")
        out = io.BytesIO()
        entity_writer(type(head))(out, head)
        assert encode(head) == out.getvalue()


def test_a_case_is_rebuilt_from_its_seed_and_number_alone():
    for number in (0, 7, 1999):
        assert build(SEED, number, CTX) == build(SEED, number, CTX)
    assert build(SEED, 1, CTX) != build(SEED + 1, 1, CTX)


def test_every_served_api_and_every_kind_of_frame_is_drawn():
    cases = [build(SEED, n, CTX) for n in range(CASES)]
    frames = [f for c in cases for f in c.frames]
    assert {f.api_key for f in frames if f.well_formed} == set(SERVED)
    assert {f.kind for f in frames} == {
        "seed", "values", "tags", "trailing", "header", "pieces", "bytes", "size", "garbage"
    }  # fmt: skip
    assert any(len(c.frames) == 5 for c in cases)
    pipelined = [f for c in cases for f in c.frames[:-1]]
    assert all(f.well_formed for f in pipelined if len(f.data) <= (1 << 20) + 4)
    assert collections.Counter(f.well_formed for f in frames)[True] > len(frames) / 2


def _frame(request, correlation_id, **expected):
    return Frame(request_frame(request, correlation_id), "seed", "", True, **expected)


def _metadata_answer(correlation_id, error=None):
    """A Metadata v12 response frame (without its size) to `correlation_id`; with `error`,
    one topic with that error."""
    response_type = load_response_schema(3, 12)
    topic = sys.modules[response_type.__module__].MetadataResponseTopic
    topics = (
        () if error is None else (topic(error_code=error, name="t", topic_id=None, partitions=()),)
    )
    body = response_type(
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=1,
        topics=topics,
    )
    out = io.BytesIO()
    entity_writer(response_type.__header_schema__)(
        out, response_type.__header_schema__(correlation_id=correlation_id)
    )
    entity_writer(response_type)(out, body)
    return out.getvalue()


METADATA = load_request_schema(3, 12)(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def test_answers_are_matched_to_requests_in_order_past_unanswered_acks0_produces():
    produce = load_request_schema(0, 9)(transactional_id=None, acks=0, timeout=0, topic_data=())
    frames = (_frame(METADATA, 1), _frame(produce, 2, quiet=True), _frame(METADATA, 3))
    case = Case(0, 0, 1, frames)
    answered = Exchange([_metadata_answer(1), _metadata_answer(3)], CLOSED)
    assert checks.answer_problems(case, answered, "") == []
    swapped = Exchange([_metadata_answer(3), _metadata_answer(1)], CLOSED)
    assert [p.kind for p in checks.answer_problems(case, swapped, "")] == [checks.ORDER]
    assert checks.settled(case, [_metadata_answer(1)]) is False
    assert checks.settled(case, [_metadata_answer(1), _metadata_answer(3)]) is True


def test_a_closed_connection_is_a_finding_for_a_well_formed_request_or_one_without_a_reason():
    well_formed_frame = _frame(METADATA, 5)
    malformed = Frame(struct.pack(">i", -1), "size", "size -1", False, garbles=True)
    closed = Exchange([], CLOSED, local="127.0.0.1:4242")
    said = "[t] INFO strom.kafka: Closing socket connection to 127.0.0.1:4242 on listener KAFKA"
    problems = checks.answer_problems(Case(0, 0, 1, (well_formed_frame,)), closed, said)
    assert [p.kind for p in problems] == [checks.UNANSWERED]
    assert checks.answer_problems(Case(0, 0, 1, (malformed,)), closed, said) == []
    problems = checks.answer_problems(Case(0, 0, 1, (malformed,)), closed, "")
    assert [p.kind for p in problems] == [checks.UNEXPLAINED]
    late = Exchange([], DEADLINE)
    waiting = _frame(METADATA, 6, waits=True)
    assert checks.answer_problems(Case(0, 0, 1, (waiting,)), late, "") == []
    problems = checks.answer_problems(Case(0, 0, 1, (well_formed_frame,)), late, "")
    assert [p.kind for p in problems] == [checks.UNANSWERED]


def test_an_unknown_server_error_or_an_undecodable_answer_is_a_finding():
    case = Case(0, 0, 1, (_frame(METADATA, 9),))
    failed = Exchange([_metadata_answer(9, ErrorCode.unknown_server_error)], CLOSED)
    assert [p.kind for p in checks.answer_problems(case, failed, "")] == [checks.UNKNOWN]
    torn = Exchange([_metadata_answer(9)[:-3]], CLOSED)
    assert [p.kind for p in checks.answer_problems(case, torn, "")] == [checks.UNDECODABLE]


def test_errors_tracebacks_and_aborts_in_a_log_are_problems_info_lines_are_not():
    log = (
        "[2026-01-01 00:00:00,000] INFO strom.kafka: Closing socket connection to x\n"
        "[2026-01-01 00:00:01,000] ERROR strom.kafka: request 12 failed: TypeError: boom\n"
        "Traceback (most recent call last):\n"
        '  File "/x/server/kafka/handlers.py", line 3, in handle\n'
        "TypeError: boom\n"
        "memory allocation of 34359738352 bytes failed\n"
    )
    found = checks.logged_problems(log)
    assert found[0] == "ERROR strom.kafka: request N failed: TypeError: boom"
    assert found[1].startswith("traceback handlers.py:handle: TypeError")
    assert found[2] == "memory allocation of N bytes failed"
    assert len(found) == 3


# --- the run -----------------------------------------------------------------------------


def test_the_run_exercised_the_cluster(result):
    assert result.cases >= 200, fuzz.format_result(result)


def test_no_node_exits(result):
    assert not findings(result, checks.CRASH)


def test_every_node_answers_metadata_within_a_second_after_every_case(result):
    assert not findings(result, checks.HANG)


def test_no_node_stalls_while_a_case_runs(result):
    assert not findings(result, checks.STALL)


def test_no_error_or_traceback_is_logged(result):
    assert not findings(result, checks.LOGGED)


def test_no_answer_says_unknown_server_error(result):
    assert not findings(result, checks.UNKNOWN)


def test_every_well_formed_request_is_answered(result):
    assert not findings(result, checks.UNANSWERED)


def test_a_connection_closed_on_a_malformed_frame_is_closed_with_a_reason(result):
    assert not findings(result, checks.UNEXPLAINED)


def test_answers_come_in_the_order_of_their_requests(result):
    assert not findings(result, checks.ORDER)


def test_every_answer_decodes_as_the_response_to_its_request(result):
    assert not findings(result, checks.UNDECODABLE)
