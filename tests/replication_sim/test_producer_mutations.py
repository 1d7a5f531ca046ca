"""The simulator checks the client's sending rules, not a copy of them (issue 19): its
producers drive strom/producer_sequencing.py, the class strom/sender.py pumps, so breaking a
rule there makes seeds fail. Each mutation below is caught by the seeds named
(a DUPLICATE in the final log, invariant (6)), which pass with the rule intact:
- a retry takes the partition's next sequence under the same epoch instead of keeping its
  numbers: a batch whose first attempt was written is written again;
- the epoch is bumped while batches of unknown fate wait to be resolved under their old
  numbers: renumbered, one that was written is written again;
- OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier unsettled batch is taken as a lost producer
  state: the batch goes again under a new epoch, and so does the earlier one it waited for.

Rules the simulator cannot notice, with why (tests/client/test_producer_sequencing.py drives
them by hand):
- a batch known written by a later acknowledgement: without the rule its retry is answered
  as a duplicate or, refused, fails; either is safe, so no invariant can tell;
- numbers given back for a batch refused outright: the simulated brokers refuse an
  idempotent batch only with retriable or producer-state errors;
- room() holding a partition while a batch of the old epoch is in flight: the epoch changes
  only with nothing in flight (send_step's WAIT, the mutation above) and a batch is
  renumbered as it is dispatched, so no pump reaches that state;
- batches queued ahead of one of unknown fate leaving with it before a bump (resolving()):
  without the rule such a batch holds its partition's queue, and with it the bump and every
  partition's sends, until it expires at delivery.timeout.ms, which settles it (failed) and
  lets the batch of unknown fate go: the producer stalls and fails a batch, which no
  invariant forbids (nothing acknowledged is lost or written twice; the liveness phase's
  producer is a new one). With many partitions per producer no seed of 0-599 fails
  without the rule."""

from __future__ import annotations

import pytest

from strom.producer_sequencing import ProducerSequencing, SendStep
from tests.replication_sim.simulation import run_seed


def renumbered_retries(monkeypatch):
    rule = ProducerSequencing.sending

    def sending(self, batch):
        if self.config.idempotent and 0 <= batch.epoch == self.producer_epoch:
            batch.epoch = -1  # forget its numbers: it takes the partition's next sequence
        return rule(self, batch)

    monkeypatch.setattr(ProducerSequencing, "sending", sending)


def bump_before_resolving(monkeypatch):
    rule = ProducerSequencing.send_step

    def send_step(self):
        step = rule(self)
        return SendStep.INIT_PRODUCER_ID if step is SendStep.RESOLVE_UNKNOWN else step

    monkeypatch.setattr(ProducerSequencing, "send_step", send_step)


def out_of_order_as_lost_state(monkeypatch):
    monkeypatch.setattr(ProducerSequencing, "_earlier_unsettled", lambda self, batch: False)


MUTATIONS = {  # the CI seeds that catch each
    renumbered_retries: (0, 1, 13),
    bump_before_resolving: (35,),
    # Not one of the CI seeds 0-149 since follower fetch sessions changed the timings.
    out_of_order_as_lost_state: (385,),
}


@pytest.mark.parametrize(
    ("mutate", "seeds"), MUTATIONS.items(), ids=[m.__name__ for m in MUTATIONS]
)
def test_a_broken_sending_rule_is_caught(monkeypatch, mutate, seeds):
    mutate(monkeypatch)
    failures = {seed: run_seed(seed).failure for seed in seeds}
    missed = [seed for seed, failure in failures.items() if failure is None]
    assert not missed, f"seeds {missed} did not notice {mutate.__name__}"
    for failure in failures.values():
        assert failure is not None and "DUPLICATE" in failure.split("\n", 1)[0]


@pytest.mark.parametrize("seed", sorted({s for seeds in MUTATIONS.values() for s in seeds}))
def test_the_same_seeds_pass_with_the_rules_intact(seed):
    assert run_seed(seed).failure is None
