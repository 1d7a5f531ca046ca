"""The simulator checks the controller quorum's rules, not a copy of them (issue 19): every
controller node runs the product's ControllerCore and HeartbeatTracker (quorum.py) and every
broker the product's ControllerRouting (controller_link.py), so breaking a rule that only a
controller failover exercises makes seeds of the CI range fail, seeds that pass with the
rule intact (test_replication_sim.py's chunks):
- a newly active controller that does not re-seed its heartbeat tracker
  (QuorumController._sync's tracker.reseed): it knows no contact of any broker, so it fences
  every unfenced broker at its first session check, though their heartbeats reached the
  controller before it moments ago (invariant (t); seeds 3, 6 and 8);
- a controller core that keeps its pending writes when it loses leadership
  (ControllerCore.renounce): a write whose offsets the next leader filled with its own
  records is later taken as committed and answered (invariant (r); seed 18 of
  0-149).

Rules the simulator cannot notice, with why (tests/broker/test_controller_routing.py and
tests/broker/test_lifecycle_client.py drive them by hand):
- following NOT_CONTROLLER's active_controller_id (ControllerRouting.refused moving on to
  the next voter instead): with at most 3 voters the next try reaches the active controller
  within two more, and a heartbeat's lost try costs less than a session (no seed of 0-149
  fails);
- len(voters) + 1 tries per call_controller call (one instead): an AlterPartition without
  an answer stays pending and is sent again after a backoff (broker/isr_proposals.py), so
  fewer tries only delay it (no seed of 0-149 fails);
- a forwarded admin request's rule (ControllerRouting.forward_refused): the simulated
  clients send no admin requests.
"""

from __future__ import annotations

import pytest

from metadata.broker_lifecycle import HeartbeatTracker
from metadata.controller_core import ControllerCore
from tests.replication_sim.simulation import run_seed

RESEED_SEEDS = (3, 6)
PENDING_SEEDS = (18,)


def test_a_new_controller_that_does_not_reseed_the_sessions_is_caught(monkeypatch):
    monkeypatch.setattr(HeartbeatTracker, "reseed", lambda self, image, now_ms: None)
    failures = [run_seed(seed).failure for seed in RESEED_SEEDS]
    assert all(f is not None and "invariant (t)" in f.split("\n", 1)[0] for f in failures), failures


def test_pending_writes_kept_after_leadership_loss_are_caught(monkeypatch):
    def renounce_keeping_pending(self):
        if self.epoch is not None:
            self._renounced_epoch = self.epoch
        self.epoch = None
        return []  # the pending writes stay, as if they could still commit

    monkeypatch.setattr(ControllerCore, "renounce", renounce_keeping_pending)
    failures = [run_seed(seed).failure for seed in PENDING_SEEDS]
    assert all(f is not None and "invariant (r)" in f.split("\n", 1)[0] for f in failures), failures


@pytest.mark.parametrize("seed", sorted({*RESEED_SEEDS, *PENDING_SEEDS}))
def test_the_same_seeds_pass_with_the_rules_intact(seed):
    assert run_seed(seed).failure is None
