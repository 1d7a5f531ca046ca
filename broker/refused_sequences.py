"""Which producers' next batch a leader just refused NOT_ENOUGH_REPLICAS, so that the batches
pipelined behind it are refused the same way rather than OUT_OF_ORDER_SEQUENCE_NUMBER.
Sans-I/O; one per partition, created on its first such refusal.

Why: an idempotent producer keeps up to 5 requests of a partition in flight. When the ISR is
below min.insync.replicas, the first (sequence s) is refused NOT_ENOUGH_REPLICAS and nothing
is written. If the ISR grows back before the next request (sequence s + n) is checked, that
one now meets a gap, and Kafka's broker answers OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka
takes that answer behind a failed request for "skipped sequence numbers": it drains every
partition and bumps the producer's epoch, renumbering all unacknowledged records, and a
record already written under the old epoch whose answer was lost (a killed leader) is then
written again. The chaos suite's confluent-kafka run (seed 2) duplicated records so.

The gap is one this leader made itself, so it answers the batches behind it with the
refusal that made it (retriable, nothing written): the producer retries them all in order.
Only while the refused batch is still the one the producer's state expects next, and for
REFUSAL_MEMORY_MS: a producer that gave the refused batch up (its delivery timed out) gets
Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER again after that and resets as it would have.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.producer_state import ProducerStateManager
from strom_api.record_batch import NO_PRODUCER_ID, BatchHeader

# Kafka's default request.timeout.ms: librdkafka retries a refused request after
# retry.backoff.ms (100 ms), far sooner.
REFUSAL_MEMORY_MS = 30_000
# Producers remembered per partition; the oldest refusal is forgotten past this.
MAX_REFUSALS = 1_000


@dataclass(frozen=True, slots=True)
class Refusal:
    epoch: int
    first_seq: int
    at_ms: int


class RefusedSequences:
    def __init__(self) -> None:
        self._refusals: dict[int, Refusal] = {}

    def __len__(self) -> int:
        return len(self._refusals)

    def record(
        self, headers: Iterable[BatchHeader], producers: ProducerStateManager, now_ms: int
    ) -> None:
        """Remembers, of these refused batches, each that was its producer's next batch."""
        for header in headers:
            pid = header.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            if producers.expected_sequence(pid, header.producer_epoch) != header.base_sequence:
                continue  # a retry of a written batch, or one behind a gap of its own
            self._refusals.pop(pid, None)  # re-inserted last: the dict's order is age
            self._refusals[pid] = Refusal(header.producer_epoch, header.base_sequence, now_ms)
            if len(self._refusals) > MAX_REFUSALS:
                del self._refusals[next(iter(self._refusals))]

    def explains_gap(
        self, header: BatchHeader, producers: ProducerStateManager, now_ms: int
    ) -> Refusal | None:
        """The refusal that left the gap in front of `header` (refused out of order or as an
        unknown producer), or None when its gap is not of this leader's making."""
        refusal = self._refusals.get(header.producer_id)
        if refusal is None:
            return None
        if now_ms - refusal.at_ms > REFUSAL_MEMORY_MS:
            del self._refusals[header.producer_id]
            return None
        if header.producer_epoch != refusal.epoch or header.base_sequence == refusal.first_seq:
            return None
        if producers.expected_sequence(header.producer_id, refusal.epoch) != refusal.first_seq:
            return None  # the producer's state moved on: that batch is no longer missing
        return refusal

    def appended(self, headers: Iterable[BatchHeader]) -> None:
        """These batches are in the log: their producers' gaps, if any, are closed."""
        if self._refusals:
            for header in headers:
                self._refusals.pop(header.producer_id, None)
