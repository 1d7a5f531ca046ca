"""The producer's sending rules (strom/producer_sequencing.py) driven by hand: events in, the
decisions out, with no broker, no clock and no event loop. Each test is one of the rules
strom/sender.py used to hold mixed with its I/O."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from strom.errors import KafkaTimeoutError, StromError
from strom.producer_sequencing import (
    SEQUENCES,
    Fail,
    ProducerSequencing,
    Retry,
    RetryReason,
    SendStep,
    SequencingConfig,
    Succeed,
)
from strom_api.idempotence import WINDOW_BATCHES

TP = ("t", 0)
BACKOFF = 100


@dataclass(eq=False)
class B:
    name: str
    record_count: int = 1
    created_ms: float = 0.0
    tp: tuple[str, int] = TP
    attempts: int = 0
    epoch: int = -1
    sequence: int = -1
    order: int = -1
    fate_unknown: bool = False
    last_error: Exception | None = None


def rules(idempotent: bool = True, **config: int) -> ProducerSequencing[B]:
    """The rules with one batch per request in flight (Kafka's counting, which keeps these
    tests' numbers small) unless `batches_per_request` is given."""
    defaults = {
        "retries": 10,
        "delivery_timeout_ms": 120_000,
        "retry_backoff_ms": BACKOFF,
        "batches_per_request": 1,
    }
    core: ProducerSequencing[B] = ProducerSequencing(
        SequencingConfig(idempotent=idempotent, **(defaults | config))
    )
    if idempotent:
        assert core.send_step() is SendStep.INIT_PRODUCER_ID  # nothing leaves without an id
        core.producer_id_granted(7, 0)
    assert core.send_step() is SendStep.SEND
    return core


def send(core: ProducerSequencing[B], *batches: B) -> list[tuple[int, int, int]]:
    """Drain, dispatch and number each batch, as one Sender step would (one request each)."""
    numbers = []
    for batch in batches:
        core.drained(batch)
        core.dispatched(batch)
        n = core.sending(batch)
        numbers.append((n.producer_id, n.epoch, n.sequence))
    return numbers


def answered(core, batch, outcome):
    core.request_ended([batch])
    return outcome


def error(name: str, retriable: bool = False) -> StromError:
    return StromError(name, "scripted", retriable)


NETWORK = StromError("NETWORK_EXCEPTION", "broker 1: UNAVAILABLE", True)


def test_max_in_flight_per_partition_and_one_at_a_time_after_an_error():
    core = rules(max_in_flight=3)
    a, b, c = B("a"), B("b"), B("c")
    assert core.room(TP) == 3 and core.room(("other", 0)) == 3
    send(core, a, b)
    assert core.room(TP) == 1
    retry = answered(core, a, core.refused(a, error("NOT_LEADER_OR_FOLLOWER", True), 1_000))
    assert isinstance(retry, Retry) and retry.reason is RetryReason.BACKOFF
    assert retry.at_ms == 1_000 + BACKOFF  # retry.backoff.ms
    assert core.room(TP) == 0  # recovering: nothing more while b is in flight
    assert isinstance(answered(core, b, core.acknowledged(b, 5, -1)), Succeed)
    # b succeeded with nothing else in flight: the partition pipelines again.
    assert core.room(TP) == 3
    send(core, a)
    assert a.attempts == 2 and core.room(TP) == 2
    send(core, c)
    assert c.order == 2 and a.order == 0  # a keeps its first-sent place


def test_a_partition_may_have_five_batches_in_flight_per_request_allowed():
    """SequencingConfig's default: 5 batches per request in flight, 25 at Kafka's default
    max.in.flight.requests.per.connection, as many as a leader remembers; after an error
    still one at a time."""
    assert SequencingConfig(True, 10, 120_000, BACKOFF).batches_per_request == 5
    core = rules(batches_per_request=5)
    assert core.room(TP) == WINDOW_BATCHES == 25
    batches = [B(str(i)) for i in range(25)]
    send(core, *batches)
    assert core.room(TP) == 0
    answered(core, batches[0], core.no_answer(batches[0], NETWORK, 10))
    assert core.room(TP) == 0  # recovering, with batches in flight
    assert rules(batches_per_request=5, max_in_flight=1).room(TP) == 5


def test_after_an_error_only_one_batch_until_a_success_alone():
    core = rules()
    a, b = B("a"), B("b")
    send(core, a)
    answered(core, a, core.no_answer(a, NETWORK, 10))
    assert core.room(TP) == 1  # one batch at a time
    send(core, a)
    assert core.room(TP) == 0
    answered(core, a, core.acknowledged(a, 0, -1))
    assert core.room(TP) == 5
    send(core, b)
    assert b.sequence == 1


def test_a_retry_keeps_its_numbers_and_partitions_number_apart():
    core = rules()
    a, b, other = B("a", record_count=3), B("b", record_count=2), B("x", tp=("u", 1))
    assert send(core, a, b, other) == [(7, 0, 0), (7, 0, 3), (7, 0, 0)]
    answered(core, a, core.no_answer(a, NETWORK, 10))
    assert a.fate_unknown
    core.drained(a)
    core.dispatched(a)
    again = core.sending(a)
    assert (again.epoch, again.sequence, again.renumbered) == (0, 0, False)


def test_without_idempotence_batches_carry_no_numbers():
    core = rules(idempotent=False)
    a = B("a")
    assert send(core, a) == [(-1, -1, -1)]
    outcome = answered(core, a, core.refused(a, error("UNKNOWN_PRODUCER_ID"), 10))
    assert isinstance(outcome, Fail)  # no epoch to bump: a plain error
    assert core.send_step() is SendStep.SEND


def test_numbers_of_a_batch_refused_outright_are_given_back_when_nothing_followed():
    core = rules()
    a, b = B("a", record_count=2), B("b")
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("INVALID_RECORD"), 10))
    assert isinstance(outcome, Fail) and outcome.error.name == "INVALID_RECORD"
    assert core.send_step() is SendStep.SEND  # no bump
    assert send(core, b) == [(7, 0, 0)]  # a's numbers, free again


def test_a_refused_batch_with_later_numbers_after_it_bumps_the_epoch():
    core = rules()
    a, b = B("a"), B("b")
    send(core, a, b)
    assert isinstance(answered(core, a, core.refused(a, error("INVALID_RECORD"), 10)), Fail)
    assert core.send_step() is SendStep.WAIT  # b's request is still in flight
    answered(core, b, core.acknowledged(b, 1, -1))
    assert core.send_step() is SendStep.INIT_PRODUCER_ID
    core.producer_id_granted(7, 1)
    c = B("c")
    assert send(core, c) == [(7, 1, 0)]  # numbering restarts in the new epoch


def test_out_of_order_behind_an_unanswered_batch_means_after_that_one():
    core = rules()
    a, b = B("a"), B("b")
    send(core, a, b)
    first = answered(core, a, core.no_answer(a, NETWORK, 10))
    assert isinstance(first, Retry)
    second = answered(core, b, core.refused(b, error("OUT_OF_ORDER_SEQUENCE_NUMBER"), 11))
    assert isinstance(second, Retry) and second.reason is RetryReason.BEHIND_EARLIER
    assert second.at_ms == 11  # at once, right behind a
    assert core.send_step() is SendStep.SEND  # no epoch bump
    assert send(core, a, b) == [(7, 0, 0), (7, 0, 1)]  # same numbers, first-sent order


def test_out_of_order_with_nothing_unsettled_before_it_bumps_the_epoch():
    core = rules()
    a = B("a")
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("OUT_OF_ORDER_SEQUENCE_NUMBER"), 10))
    assert isinstance(outcome, Retry) and outcome.reason is RetryReason.NEW_EPOCH
    assert core.send_step() is SendStep.INIT_PRODUCER_ID
    core.producer_id_granted(7, 1)
    assert send(core, a) == [(7, 1, 0)]


@pytest.mark.parametrize("name", ["UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"])
def test_a_lost_producer_state_bumps_the_epoch_once_nothing_is_in_flight(name):
    """KIP-360; and no batch of the new epoch leaves while old-epoch batches are in flight."""
    core = rules()
    a, b = B("a", tp=("u", 0)), B("b")
    send(core, a, b)
    outcome = answered(core, b, core.refused(b, error(name), 10))
    assert isinstance(outcome, Retry) and outcome.reason is RetryReason.NEW_EPOCH
    assert core.bump_needed()
    assert core.send_step() is SendStep.WAIT  # a (epoch 0) is still in flight
    answered(core, a, core.acknowledged(a, 0, -1))
    assert core.send_step() is SendStep.INIT_PRODUCER_ID
    core.producer_id_granted(7, 1)
    assert send(core, b, B("c", tp=("u", 0))) == [(7, 1, 0), (7, 1, 0)]


def test_a_batch_not_yet_renumbered_for_the_new_epoch_holds_its_partition():
    core = rules()
    a, b = B("a"), B("b")
    send(core, a)
    answered(core, a, core.refused(a, error("UNKNOWN_PRODUCER_ID"), 10))
    core.producer_id_granted(7, 1)
    core.drained(a)
    core.dispatched(a)  # still numbered in epoch 0 until its request is built
    assert core.room(TP) == 0
    core.sending(a)
    answered(core, a, core.acknowledged(a, 0, -1))
    send(core, b)
    assert (b.epoch, b.sequence) == (1, 1)


def test_batches_of_unknown_fate_are_resolved_with_their_old_numbers_before_a_bump():
    core = rules()
    a, b = B("a"), B("b", tp=("u", 0))
    send(core, a, b)
    answered(core, a, core.no_answer(a, NETWORK, 10))  # written or not: unknown
    answered(core, b, core.refused(b, error("UNKNOWN_PRODUCER_ID"), 10))
    assert core.send_step() is SendStep.RESOLVE_UNKNOWN
    assert send(core, a) == [(7, 0, 0)]  # old epoch: a duplicate is recognised
    assert core.send_step() is SendStep.WAIT
    answered(core, a, core.acknowledged(a, 0, -1))
    assert core.send_step() is SendStep.INIT_PRODUCER_ID


def test_an_unanswered_batch_is_known_written_once_a_later_one_is_acknowledged():
    core = rules()
    a, b = B("a"), B("b")
    send(core, a, b)
    answered(core, b, core.acknowledged(b, 1, -1))
    outcome = answered(core, a, core.no_answer(a, NETWORK, 10))
    assert isinstance(outcome, Succeed) and outcome.base_offset == -1
    assert core.send_step() is SendStep.SEND  # no epoch bump


def test_a_retry_answered_out_of_order_after_a_later_ack_succeeds_instead_of_a_new_epoch():
    """tests/client/test_producer_unknown_fate.py's story (found by tests/chaos)."""
    core = rules()
    a, b = B("a"), B("b")
    send(core, a, b)
    answered(core, a, core.no_answer(a, NETWORK, 10))
    answered(core, b, core.acknowledged(b, 1, -1))
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("OUT_OF_ORDER_SEQUENCE_NUMBER"), 20))
    assert isinstance(outcome, Succeed) and outcome.base_offset == -1
    assert not core.bump_needed()


def test_an_ack_of_another_epoch_proves_nothing():
    core = rules()
    a = B("a")
    send(core, a)
    answered(core, a, core.no_answer(a, NETWORK, 10))
    core.producer_id_granted(7, 1)  # (as after a bump)
    b = B("b")
    send(core, b)
    answered(core, b, core.acknowledged(b, 1, -1))
    a.epoch = 0
    outcome = core.expired(a, 200_000, leader=1)
    assert isinstance(outcome, Fail)


def test_retries_end_at_delivery_timeout_and_an_unknown_fate_bumps_the_epoch():
    core = rules(delivery_timeout_ms=1_000)
    a = B("a", created_ms=0)
    send(core, a)
    assert isinstance(answered(core, a, core.no_answer(a, NETWORK, 900)), Retry)
    send(core, a)
    outcome = answered(core, a, core.no_answer(a, NETWORK, 1_001))
    assert isinstance(outcome, Fail) and isinstance(outcome.error, KafkaTimeoutError)
    assert "not delivered after 2 attempt(s) in 1001 ms" in str(outcome.error)
    assert outcome.error.__cause__ is NETWORK
    assert core.send_step() is SendStep.INIT_PRODUCER_ID  # written or not, nobody knows


def test_retries_end_after_the_configured_attempts():
    core = rules(idempotent=False, retries=1)
    a = B("a")
    send(core, a)
    busy = error("NOT_ENOUGH_REPLICAS", True)
    assert isinstance(answered(core, a, core.refused(a, busy, 10)), Retry)
    send(core, a)
    outcome = answered(core, a, core.refused(a, busy, 20))
    assert isinstance(outcome, Fail) and outcome.error is busy


def test_a_fatal_error_fails_at_once():
    core = rules(idempotent=False)
    a = B("a")
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("TOPIC_AUTHORIZATION_FAILED"), 10))
    assert isinstance(outcome, Fail) and a.attempts == 1


def test_an_expired_batch_names_its_last_error_and_bumps_a_numbered_epoch():
    core = rules(delivery_timeout_ms=1_000)
    never_sent = B("n")
    outcome = core.expired(never_sent, 2_000, leader=3)
    assert isinstance(outcome, Fail)
    assert "expired after delivery.timeout.ms=1000 without being sent (leader 3)" in str(
        outcome.error
    )
    assert core.send_step() is SendStep.SEND  # never numbered: nothing to bump
    a = B("a")
    send(core, a)
    busy = error("NOT_ENOUGH_REPLICAS", True)
    answered(core, a, core.refused(a, busy, 10))
    outcome = core.expired(a, 2_000, leader=3)
    assert isinstance(outcome, Fail) and "last error NOT_ENOUGH_REPLICAS" in str(outcome.error)
    assert core.send_step() is SendStep.INIT_PRODUCER_ID


def test_appended_but_not_replicated_is_a_batch_of_unknown_fate():
    core = rules()
    a = B("a")
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("REQUEST_TIMED_OUT", True), 10))
    assert isinstance(outcome, Retry) and a.fate_unknown
    send(core, a)
    answered(core, a, core.refused(a, error("NOT_LEADER_OR_FOLLOWER", True), 20))
    assert a.fate_unknown  # this attempt was refused; the first one may still be kept
    b = B("b", tp=("u", 0))
    send(core, b)
    answered(core, b, core.refused(b, error("NOT_LEADER_OR_FOLLOWER", True), 20))
    assert not b.fate_unknown  # refused outright: not written


def test_sequences_wrap_at_two_to_the_31():
    core = rules()
    filler = B("f", record_count=SEQUENCES - 1)
    a, b = B("a", record_count=2), B("b")
    send(core, filler, a, b)
    assert (a.sequence, b.sequence) == (SEQUENCES - 1, 1)
    answered(core, b, core.acknowledged(b, 10, -1))
    # a's last sequence (0) comes before b's (1) across the wrap: a is known written.
    outcome = answered(core, a, core.no_answer(a, NETWORK, 10))
    assert isinstance(outcome, Succeed)


@pytest.mark.parametrize("name", ["UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"])
@pytest.mark.parametrize("between", [None, "NOT_LEADER_OR_FOLLOWER"])
def test_a_batch_of_unknown_fate_refused_by_a_deposed_leader_fails_rather_than_renumbered(
    name, between
):
    """Found by tests/replication_sim (seed 100): a batch whose request got no answer had been
    written by the leader; its retry went to a deposed leader that did not know the producer
    and answered UNKNOWN_PRODUCER_ID / OUT_OF_ORDER_SEQUENCE_NUMBER; the batch was sent again
    under a new epoch and written a second time. A refusal of one attempt says nothing of an
    earlier one: it fails (Kafka's producer fails a batch refused so while its partition has
    an unresolved sequence), and the epoch is bumped for the batches after it."""
    core = rules()
    a = B("a")
    send(core, a)
    answered(core, a, core.no_answer(a, NETWORK, 10))
    if between is not None:  # a refusal in between proves this attempt unwritten, not the first
        send(core, a)
        answered(core, a, core.refused(a, error(between, True), 20))
    send(core, a)
    outcome = answered(core, a, core.refused(a, error(name), 30))
    assert isinstance(outcome, Fail) and outcome.error.name == name
    assert core.send_step() is SendStep.INIT_PRODUCER_ID


def test_numbers_of_a_batch_of_unknown_fate_are_never_given_back():
    core = rules()
    a = B("a")
    send(core, a)
    answered(core, a, core.no_answer(a, NETWORK, 10))
    send(core, a)
    outcome = answered(core, a, core.refused(a, error("INVALID_RECORD"), 20))
    assert isinstance(outcome, Fail)
    assert core.send_step() is SendStep.INIT_PRODUCER_ID  # its first attempt may be written


def test_batches_queued_before_one_of_unknown_fate_leave_with_it_before_a_bump():
    """Seen in tests/replication_sim (seed 280) once its producers pipelined: a batch not of
    unknown fate waiting ahead of one of unknown fate held its partition's queue in the
    RESOLVE_UNKNOWN step, so the epoch bump, and with it every partition's sends, waited
    until it expired at delivery.timeout.ms. Here another partition asks for the bump."""
    core = rules()
    a, b, c, other = B("a"), B("b"), B("c"), B("x", tp=("u", 0))
    send(core, a, b, c, other)
    answered(core, a, core.refused(a, error("NOT_LEADER_OR_FOLLOWER", True), 10))
    answered(core, b, core.no_answer(b, NETWORK, 10))
    answered(core, c, core.refused(c, error("OUT_OF_ORDER_SEQUENCE_NUMBER"), 10))
    answered(core, other, core.refused(other, error("UNKNOWN_PRODUCER_ID"), 10))
    assert core.send_step() is SendStep.RESOLVE_UNKNOWN
    # The queue is a, b, c (first-sent order): a goes before b, old numbers; c waits.
    assert [core.resolving(x) for x in (a, b, c, other)] == [True, True, False, False]
    assert send(core, a, b) == [(7, 0, 0), (7, 0, 1)]
