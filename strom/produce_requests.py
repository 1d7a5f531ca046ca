"""Which Produce requests carry the batches the producer drained for one broker (sans-I/O).

Kafka's producer sends a broker one request per drain with one batch of every ready partition
it leads, up to max.request.size (its Produce v3+ takes one batch per partition). Strom's
Produce takes several batches of a partition (the leader checks each against its producer
state in turn and appends them together), and a leader's cost is mostly per request, not per
byte: on the 2-core bench machine, 3 leaders took ~15k records/s of 1 KiB in requests of one
16 KiB batch and ~35k/s in requests of five (bench/clients.py prints both shapes). So a
partition's ready batches share a request too. The rules:

- A partition's batches keep their drained (sequence) order across requests: a batch never
  goes in an earlier request than the batch drained before it, since requests are numbered
  and sent in the order they are made.
- A batch sent before (a retry) goes alone for its partition: a leader answers a request in
  which any batch is one it already wrote with that batch's offsets and appends none of the
  others (Kafka's duplicate rule), so new batches beside a retry could look written.
- A request holds at most max.request.size bytes of batches (their estimated sizes); one
  larger batch goes alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

TopicPartition = tuple[str, int]


class Batch(Protocol):
    @property
    def tp(self) -> TopicPartition: ...

    attempts: int  # requests that carried it so far
    size: int  # estimated bytes


B = TypeVar("B", bound=Batch)


def produce_requests(batches: Sequence[B], max_bytes: int) -> list[list[B]]:
    """The requests, in the order to send them, each a list of batches in which a
    partition's batches are consecutive and in their drained order."""
    requests: list[list[B]] = []
    sizes: list[int] = []
    last: dict[TopicPartition, int] = {}  # the request holding a partition's last batch
    closed: set[tuple[int, TopicPartition]] = set()  # (request, partition): a retry in it
    for batch in batches:
        tp = batch.tp
        at = last.get(tp)
        fresh = batch.attempts == 0
        if (
            at is not None
            and fresh
            and (at, tp) not in closed
            and sizes[at] + batch.size <= max_bytes
        ):
            requests[at].append(batch)
            sizes[at] += batch.size
            continue
        start = 0 if at is None else at + 1
        for index in range(start, len(requests)):
            if sizes[index] + batch.size <= max_bytes and all(b.tp != tp for b in requests[index]):
                break
        else:
            index = len(requests)
            requests.append([])
            sizes.append(0)
        requests[index].append(batch)
        sizes[index] += batch.size
        last[tp] = index
        if not fresh:
            closed.add((index, tp))
    # A partition's batches consecutive within each request (the encoder joins them).
    for request in requests:
        order: dict[TopicPartition, int] = {}
        for batch in request:
            order.setdefault(batch.tp, len(order))
        request.sort(key=lambda b: order[b.tp])
    return requests
