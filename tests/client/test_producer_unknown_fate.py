"""The idempotent producer and a batch whose request got no answer, against a scripted
broker on real gRPC (the fault must come at one exact moment, which a real cluster cannot
be made to do on demand).

Found by tests/chaos (seed 1, kill-leader): a batch's request hung while later batches of
the partition were acknowledged; the leader was killed; the batch's retry went to a leader
that remembered only the last 5 batches and answered OUT_OF_ORDER_SEQUENCE_NUMBER; the
producer bumped its epoch and wrote the record a second time, out of order. A later batch
acknowledged proves the earlier one written (the leader takes sequence n+1 only after n):
it succeeds now, offset unknown, and the epoch stays."""

from __future__ import annotations

import threading

import grpc
import pytest

from strom.producer import Producer
from strom_api.record_batch import parse_header
from strom_api.v1 import client_pb2, common_pb2
from tests.client.scripted_broker import OnePartitionBroker, serving


class ScriptedBroker(OnePartitionBroker):
    """One broker leading the one partition of topic t. Sequence 0's first request fails as
    a broken connection; its retry is answered OUT_OF_ORDER_SEQUENCE_NUMBER, as a leader
    that no longer remembers it would. `hang`: the first request fails only once the
    producer has taken in sequence 1's acknowledgement (the chaos run's order; the test says
    when); else it fails once sequence 1 arrived, and sequence 1 is answered after the retry
    arrived (so the retry is answered after it)."""

    def __init__(self, hang: bool) -> None:
        self.hang = hang
        self.init_calls: list[tuple[int, int]] = []
        self.produced: list[tuple[int, int]] = []  # (producer epoch, base sequence)
        self.second_arrived = threading.Event()
        self.second_acked = threading.Event()
        self.client_has_second = threading.Event()  # set by the test: second's answer taken in
        self.retry_arrived = threading.Event()
        self.lock = threading.Lock()

    def InitProducerId(self, request, context):  # noqa: N802
        with self.lock:
            self.init_calls.append((request.producer_id, request.producer_epoch))
            return client_pb2.InitProducerIdResponse(
                producer_id=7, producer_epoch=len(self.init_calls) - 1
            )

    def Produce(self, request, context):  # noqa: N802
        header = parse_header(request.topics[0].partitions[0].records)
        with self.lock:
            self.produced.append((header.producer_epoch, header.base_sequence))
            first_try = self.produced.count((header.producer_epoch, header.base_sequence)) == 1
        answer = client_pb2.ProduceResponse()
        part = answer.topics.add(name="t").partitions.add(partition=0, base_offset=-1)
        if header.base_sequence == 0 and header.producer_epoch == 0:
            if first_try:
                # hang: fail only once the producer has taken in sequence 1's answer (the
                # broker's own "answered" is not enough: the abort could overtake it)
                (self.client_has_second if self.hang else self.second_arrived).wait(10)
                context.abort(grpc.StatusCode.UNAVAILABLE, "the leader went away")
            self.retry_arrived.set()
            self.second_acked.wait(10)
            threading.Event().wait(0.2)  # the producer has taken in sequence 1's answer
            part.error.code = common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
            part.error.message = "Out of order sequence number"
            return answer
        if header.base_sequence == 1:
            self.second_arrived.set()
            if not self.hang:
                self.retry_arrived.wait(1)  # the producer may hold the retry until this ends
        part.base_offset = header.base_sequence  # sequence n sits at offset n here
        part.log_append_time_ms = -1
        if header.base_sequence >= 1:
            self.second_acked.set()
        return answer


@pytest.mark.parametrize("hang", [True, False], ids=["hung-until-later-ack", "retried-first"])
def test_a_batch_of_unknown_fate_before_an_acknowledged_one_is_written_not_resent(hang):
    broker = ScriptedBroker(hang)
    with (
        serving(broker) as bootstrap,
        Producer(
            bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            retry_backoff_ms=50,
            request_timeout_ms=5000,
        ) as producer,
    ):
        first = producer.send("t", b"first", partition=0)
        while not broker.produced:  # its request is on its way, alone
            threading.Event().wait(0.01)
        second = producer.send("t", b"second", partition=0)
        assert second.get(timeout=10).offset == 1
        broker.client_has_second.set()
        assert first.get(timeout=10).offset == -1  # written; where, the answer never said
    assert broker.init_calls == [(-1, -1)]  # no epoch bump
    assert (1, 0) not in broker.produced  # never renumbered under a new epoch
    # Known written the moment its request failed, or when its retry was answered.
    assert broker.produced.count((0, 0)) == (1 if hang else 2)
