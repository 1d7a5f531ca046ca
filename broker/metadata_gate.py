"""The broker's metadata gate, without I/O: which metadata deltas reach the local replicas,
when, and as what, and when the broker's listeners may serve (Kafka's BrokerServer waiting
for its initial catch-up before its metadata publisher acts, then enabling request
processing and setting ready-to-unfence). server/node.py pumps it on the event loop, the
disk work in a worker thread; tests/replication_sim/metadata_pump.py pumps it on the simulated
clock, so the rules the simulator checks are the ones the node runs.

Events in: a delta and its image loaded (`delta_loaded`, in log order), the broker caught
up with the metadata log (`broker_caught_up`, as the controller's heartbeat answer says),
the batch handed out done (`batch_applied`, whether it succeeded or failed). Decisions out,
from `poll`: the next batch to apply, and once, that the listeners may start serving.

The rules:
1. Nothing reaches the replicas before the broker has caught up. A restarted broker replays
   old records first: acting on them it would lead on an ISR that has moved on.
2. One batch at a time, in log order, each made of every delta queued when the one before
   finished (at the catch-up: all those loaded meanwhile). The pump first detaches the
   deletions of every delta of the batch (a topic deleted and created again, a replica
   moved away and back, must lose its old log even though the newest image has the name
   again), then applies one delta: the batch's only one, or for several `merged_delta`,
   which names every partition and config any of them named, each partition with its
   registration in the newest image: the role that image gives, whatever the images in
   between said. A partition none of them named already has it, so the work follows what
   changed, not the size of the image.
3. The listeners serve once the first batch after the catch-up is done (applied or failed:
   a partition whose log could not be created is not served, the rest is), at once if
   nothing was queued at the catch-up.
Not thread-safe: the pump calls it from one thread (the node's event loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metadata.delta import MetadataDelta, TopicChange
from metadata.image import EMPTY_IMAGE, MetadataImage

# The lifecycle core has no callback: a pump looks at its caught_up this often until it is
# set, then calls broker_caught_up.
CAUGHT_UP_POLL_S = 0.05


def full_delta(image: MetadataImage) -> MetadataDelta:
    """A delta that takes an empty image to `image`: every topic and partition in it is
    'changed', so applying it sets every local replica's role from `image`."""
    return MetadataDelta(EMPTY_IMAGE).replay_all(image.records())


def merged_delta(queued: Sequence[tuple[MetadataDelta, MetadataImage]]) -> MetadataDelta:
    """What the queued deltas changed, as one delta to act on (not to `apply`): every topic
    and partition any of them named, with its registration in the newest image (a topic
    gone by then is left out: detaching the deltas deletes it), and every config resource
    and broker any of them changed."""
    image = queued[-1][1]
    merged = MetadataDelta(queued[0][0].image)
    for delta, _ in queued:
        for topic_id, change in delta.topics.changed.items():
            topic = image.topics.by_id.get(topic_id)
            if topic is None:
                continue
            into = merged.topics.changed.get(topic_id)
            if into is None:
                into = merged.topics.changed[topic_id] = TopicChange(
                    topic.name, topic_id, change.created
                )
            into.created |= change.created
            for index in change.partitions:
                registration = topic.partitions.get(index)
                if registration is not None:
                    into.partitions[index] = registration
        for resource, updates in delta.configs.changed.items():
            merged.configs.changed.setdefault(resource, {}).update(updates)
        merged.cluster.changed.update(delta.cluster.changed)
    return merged


@dataclass(frozen=True, slots=True)
class ApplyBatch:
    """Apply this now: stop serving (and delete the logs of) the partitions each delta of
    `detach` deletes, in order, then create the logs `delta` needs and give every replica it
    touches the role `image` says."""

    detach: tuple[MetadataDelta, ...]
    delta: MetadataDelta
    image: MetadataImage


@dataclass(frozen=True, slots=True)
class GateStep:
    """What the pump does now: if `start_serving`, let the listeners admit calls and ask to
    be unfenced (said once); if `batch`, apply it, then call `batch_applied`."""

    start_serving: bool = False
    batch: ApplyBatch | None = None


def batch_of(queued: Sequence[tuple[MetadataDelta, MetadataImage]]) -> ApplyBatch:
    """Rule 2: every queued delta's deletions, then one delta up to the newest image."""
    image = queued[-1][1]
    delta = queued[0][0] if len(queued) == 1 else merged_delta(queued)
    return ApplyBatch(tuple(d for d, _ in queued), delta, image)


class MetadataGate:
    def __init__(self) -> None:
        self.caught_up = False  # deltas reach the replicas from now on (rule 1)
        self.serving = False  # the listeners may serve (rule 3)
        self.applying: ApplyBatch | None = None  # handed out, not done yet
        self._queued: list[tuple[MetadataDelta, MetadataImage]] = []
        self._start_serving = False  # serving decided, not said by `poll` yet

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being applied (what the node's stop waits for)."""
        return self.applying is None and not self._queued

    # --- events ----------------------------------------------------------------------------

    def delta_loaded(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """The MetadataLoader published `delta`, which takes its previous image to `image`."""
        self._queued.append((delta, image))

    def broker_caught_up(self) -> None:
        """The controller said the broker has caught up with the metadata log."""
        if self.caught_up:
            return
        self.caught_up = True
        if not self._queued:
            self._serve()

    def batch_applied(self) -> None:
        """The batch handed out by `poll` is done, applied or failed."""
        assert self.applying is not None, "batch_applied without a batch handed out"
        self.applying = None
        self._serve()

    # --- decisions ---------------------------------------------------------------------------

    def poll(self) -> GateStep:
        start, self._start_serving = self._start_serving, False
        batch = None
        if self.caught_up and self.applying is None and self._queued:
            batch = self.applying = batch_of(self._queued)
            self._queued = []
        return GateStep(start, batch)

    def _serve(self) -> None:
        if not self.serving:
            self.serving = self._start_serving = True
