"""The simulator checks the node's metadata gate, not a copy of it (issue 19): its brokers pump
broker/metadata_gate.py as server/node.py does, so breaking a rule of the gate makes seeds of
the CI range fail, seeds that pass with the rule intact (test_replication_sim.py's chunks):
- the deltas queued before the catch-up applied as the newest of them alone instead of
  the merged delta of all of them: a change to the partition in an older queued delta never
  reaches the replica, which stays out of the ISR (seeds 8 and 11, liveness);
- the oldest queued delta applied with its own image and the newer ones dropped: the
  restarted replica acts on a registration the controller has moved on from, follows a
  leader that is no longer one, and never rejoins the ISR (seeds 0 and 7, liveness);
- serving decided only at a catch-up with nothing queued, never once the first batch is
  applied: a restarted broker never asks to be unfenced (seeds 0, 3, 5, ..., liveness).

Rules the simulator cannot notice, with why (tests/broker/test_metadata_gate.py drives them
by hand):
- nothing applied before the catch-up (the gate caught up from the start): a restarted
  broker acting on the old images it replays (plan.restart_replay) leads, or follows, on an
  old registration only until the catch-up, a heartbeat or two later, and stays fenced by
  the controller, which checks the broker's metadata offset itself. To acknowledge an
  acks=all record in that window, as a leader of an old epoch, it needs min.insync.replicas
  (2 in every plan) of followers acting on the same old registration, i.e. another
  restarted broker replaying old metadata at the same moment; what else it does is refused
  (its AlterPartition carries old epochs) or retried by the clients. No seed of 0-599 (many
  partitions per broker) fails without the rule;
- the queued deltas applied one at a time, each with its own image, instead of as one: the
  simulated disk is instant, so the images in between are applied and replaced at the same
  simulated moment, and the last one leaves the replica as merged_delta would (no seed of
  0-149, the CI range, fails). In the node they cost disk work and give the replica old
  roles for as long as that work takes."""

from __future__ import annotations

from collections.abc import Sequence

from broker import metadata_gate
from broker.metadata_gate import ApplyBatch, MetadataGate
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from tests.replication_sim.simulation import RunResult, run_seed

Queued = Sequence[tuple[MetadataDelta, MetadataImage]]


def first_failure(seeds: Sequence[int]) -> RunResult | None:
    return next((r for r in map(run_seed, seeds) if r.failure is not None), None)


def test_queued_deltas_applied_as_the_newest_alone_is_caught(monkeypatch):
    def newest_alone(queued: Queued) -> ApplyBatch:
        delta, image = queued[-1]
        return ApplyBatch(tuple(d for d, _ in queued), delta, image)

    monkeypatch.setattr(metadata_gate, "batch_of", newest_alone)
    result = first_failure([8, 11])
    assert result is not None, "the simulator did not notice deltas applied without full_delta"
    assert result.kind == "liveness", result.failure


def test_the_oldest_queued_image_applied_is_caught(monkeypatch):
    def oldest_only(queued: Queued) -> ApplyBatch:
        delta, image = queued[0]
        return ApplyBatch(tuple(d for d, _ in queued), delta, image)

    monkeypatch.setattr(metadata_gate, "batch_of", oldest_only)
    result = first_failure([0, 7])
    assert result is not None, "the simulator did not notice an old image applied"
    assert result.kind == "liveness", result.failure


def test_serving_only_when_nothing_was_queued_at_the_catch_up_is_caught(monkeypatch):
    def applied_without_serving(self: MetadataGate) -> None:
        self.applying = None

    monkeypatch.setattr(MetadataGate, "batch_applied", applied_without_serving)
    result = first_failure([0, 3, 5])
    assert result is not None, "the simulator did not notice a broker that never serves"
    assert result.kind == "liveness" and "fenced" in (result.failure or ""), result.failure
