"""The workload's client seam: what a chaos run's producers and readers need from a Kafka
client, and Strom's own client (gRPC) behind it. kafka_clients.py puts confluent-kafka
(librdkafka, over the nodes' Kafka protocol listeners) behind the same seam, so one
workload, one nemesis and one checker judge both.

- ChaosProducer: an idempotent acks=all producer. `send` is asynchronous; `on_done(partition,
  offset, error)` is called once per record, with error None when the record was
  acknowledged (the acknowledgement the checker trusts; offset -1: written, where unknown).
- ChaosReader: a member of a consumer group that commits only what it asks to commit.
- Clients: makes both, and reads a whole topic at the end (the read the checker compares).

Every failure surfaces as ClientError; `refused` marks a refused login or a request the
authorizer denied (the checker counts those on a secured cluster).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from strom.consumer import Consumer, TopicPartition
from strom.errors import AuthenticationError, AuthorizationError, StromError
from strom.producer import Producer
from tests.client.cluster_helpers import FAST

# (partition, offset, error): error None means acknowledged.
OnDone = Callable[[int, int, "ClientError | None"], None]
# {(topic, partition): [(offset, value), ...]}
Polled = dict[tuple[str, int], list[tuple[int, bytes]]]


class ClientError(Exception):
    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class ChaosProducer(Protocol):
    def send(
        self,
        topic: str,
        value: bytes,
        on_done: OnDone,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> None:
        """Raises ClientError when the record cannot even be queued."""

    def close(self, timeout_s: float) -> None:
        """Waits for every record in flight (ClientError if that fails), then closes."""


class ChaosReader(Protocol):
    def poll(self, timeout_s: float) -> Polled: ...

    def commit(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Commits the position reached in each of `partitions` and returns the positions
        committed (after the coordinator accepted them)."""

    def close(self) -> None: ...


class Clients(Protocol):
    name: str  # as `--clients` spells it

    def producer(self, delivery_timeout_ms: int = 60_000) -> ChaosProducer: ...

    def group_reader(self, topic: str, group: str) -> ChaosReader: ...

    def read_all(self, topic: str, partitions: int, group: str) -> list[tuple[int, int, bytes]]:
        """Every record of the topic from its log start to the end offsets seen first, as
        (partition, offset, value)."""


def _error(exc: StromError) -> ClientError:
    return ClientError(str(exc), isinstance(exc, AuthenticationError | AuthorizationError))


class StromClients:
    """Strom's own Producer and Consumer over gRPC; `security` is kafka-python's security
    settings (none: PLAINTEXT)."""

    name = "strom"

    def __init__(self, bootstrap: str, security: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security or {}

    def producer(self, delivery_timeout_ms: int = 60_000) -> ChaosProducer:
        return _StromProducer(
            Producer(
                self.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                request_timeout_ms=5000,
                delivery_timeout_ms=delivery_timeout_ms,
                retry_backoff_ms=100,
                **self.security,
            )
        )

    def group_reader(self, topic: str, group: str) -> ChaosReader:
        try:
            consumer = Consumer(
                topic,
                bootstrap_servers=self.bootstrap,
                group_id=group,
                enable_auto_commit=False,
                request_timeout_ms=5000,
                **FAST,
                **self.security,
            )
        except StromError as exc:
            raise _error(exc) from exc
        return _StromReader(consumer)

    def read_all(self, topic: str, partitions: int, group: str) -> list[tuple[int, int, bytes]]:
        """Read by a new consumer group, subscribed, from the beginning."""
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        out: list[tuple[int, int, bytes]] = []
        with Consumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            request_timeout_ms=10_000,
            **FAST,
            **self.security,
        ) as consumer:
            ends = consumer.end_offsets(tps)
            consumer.subscribe([topic])
            done: set[TopicPartition] = {tp for tp in tps if ends[tp] == 0}
            deadline = time.monotonic() + 60
            while len(done) < len(tps):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"final read stuck: {sorted(set(tps) - done)}")
                for tp, records in consumer.poll(timeout_ms=500).items():
                    out.extend((tp.partition, r.offset, r.value) for r in records)
                    if consumer.position(tp) >= ends[tp]:
                        done.add(tp)
        return out


class _StromProducer:
    def __init__(self, producer: Producer) -> None:
        self.producer = producer

    def send(
        self,
        topic: str,
        value: bytes,
        on_done: OnDone,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> None:
        try:
            future = self.producer.send(topic, value, key=key, partition=partition)
        except StromError as exc:
            raise _error(exc) from exc

        def done(future: Any) -> None:
            error = future.exception()
            if error is not None:
                wrapped = (
                    _error(error) if isinstance(error, StromError) else ClientError(str(error))
                )
                on_done(-1, -1, wrapped)
                return
            md = future.result()
            on_done(md.partition, md.offset, None)

        future.add_done_callback(done)

    def close(self, timeout_s: float) -> None:
        try:
            self.producer.flush(timeout=timeout_s)
        except StromError as exc:
            raise _error(exc) from exc
        finally:
            self.producer.close()


class _StromReader:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def poll(self, timeout_s: float) -> Polled:
        try:
            batches = self.consumer.poll(timeout_ms=int(timeout_s * 1000))
        except StromError as exc:
            raise _error(exc) from exc
        return {
            (tp.topic, tp.partition): [(r.offset, r.value) for r in records]
            for tp, records in batches.items()
        }

    def commit(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        try:
            positions = {
                TopicPartition(t, p): self.consumer.position(TopicPartition(t, p))
                for t, p in partitions
            }
            self.consumer.commit(positions)
        except StromError as exc:
            raise _error(exc) from exc
        return {(tp.topic, tp.partition): pos for tp, pos in positions.items()}

    def close(self) -> None:
        # A reader closes at the run's end, possibly against a node the nemesis took
        # down: its leave-group may fail, and the group then expires the member.
        with contextlib.suppress(StromError):
            self.consumer.close(autocommit=False)
