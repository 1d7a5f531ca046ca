"""strom/produce_requests.py: which Produce requests carry the batches drained for a broker."""

from __future__ import annotations

from dataclasses import dataclass

from strom.produce_requests import produce_requests


@dataclass(eq=False)
class Batch:
    name: str
    topic: str = "t"
    partition: int = 0
    attempts: int = 0
    size: int = 100

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def names(requests: list[list[Batch]]) -> list[list[str]]:
    return [[b.name for b in request] for request in requests]


def test_every_ready_batch_of_a_broker_shares_one_request_partition_by_partition():
    drained = [
        Batch("a0"),
        Batch("b0", partition=1),
        Batch("a1"),
        Batch("a2"),
        Batch("b1", partition=1),
    ]
    assert names(produce_requests(drained, 1 << 20)) == [["a0", "a1", "a2", "b0", "b1"]]


def test_a_retry_goes_alone_for_its_partition_and_later_batches_after_it():
    drained = [
        Batch("a0", attempts=2),
        Batch("a1"),
        Batch("a2"),
        Batch("b0", partition=1),
    ]
    # A leader answers a request holding any batch it already wrote with that batch's
    # offsets and appends none of the others: a1 and a2 must not ride with the retry.
    assert names(produce_requests(drained, 1 << 20)) == [["a0", "b0"], ["a1", "a2"]]
    fresh_then_retry = [Batch("a0"), Batch("a1", attempts=1), Batch("a2")]
    assert names(produce_requests(fresh_then_retry, 1 << 20)) == [["a0"], ["a1"], ["a2"]]


def test_max_request_size_splits_requests_in_sequence_order():
    drained = [Batch(f"a{i}", size=400) for i in range(5)] + [Batch("b0", partition=1, size=400)]
    assert names(produce_requests(drained, 1000)) == [["a0", "a1"], ["a2", "a3"], ["a4", "b0"]]
    big = [Batch("a0", size=5000), Batch("a1", size=10)]
    assert names(produce_requests(big, 1000)) == [["a0"], ["a1"]]
