"""confluent-kafka (librdkafka) behind the workload's client seam (clients.py), talking to the
nodes' Kafka protocol listeners (kafka.listener.names; tests/kafka_listener/kafka_cluster.py).

- The producer is idempotent with acks=all (enable.idempotence=true); its delivery reports
  are the acknowledgements the checker trusts. Keyed records go where Kafka's Java client
  sends them (murmur2), as Strom's client does.
- A group reader subscribes (librdkafka's default assignors) and commits synchronously only
  the partitions it still owns.
- The final read assigns every partition from the beginning, up to the high watermarks seen
  first (librdkafka reads read_committed by default: up to the last stable offset, which
  without transactions is the high watermark).

librdkafka serves delivery reports only inside poll() and flush(): send() polls after every
record, so reports arrive on the producing thread.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.chaos.clients import ChaosProducer, ChaosReader, ClientError, OnDone, Polled

# librdkafka's counterparts of FAST (tests/client/cluster_helpers.py) and of Strom's client
# settings in clients.py: short timeouts, so faults are noticed within the run.
COMMON = {
    "socket.timeout.ms": 10_000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 100,
    "topic.metadata.refresh.interval.ms": 5000,
    # Errors only: the faults make every client log each refused connection otherwise. What
    # matters reaches the workload as delivery reports and consumer errors.
    "log_level": 2,
}

_REFUSALS = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._AUTHENTICATION,
}


class _EosLog(logging.Handler):
    """What librdkafka's idempotent producer logs as it changes course (debug=eos, its only
    debug lines here): producer ids, drains and epoch bumps and their causes, sequences
    refused, duplicates taken as delivered. The producer prints the last of them when it
    closes (stderr, which pytest shows when the test fails): they say which answer made
    librdkafka renumber records (a CI run's seed 2 duplicated one record written under
    epoch 0 and sent again under epoch 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=400)

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        # debug=msg says why each failed request failed ("encountered error"); its lines
        # for every request sent are left out.
        if record.levelno <= logging.DEBUG and (
            not line.startswith(("MSGSET", "PRODUCE", "SEND", "RECV")) or "error" in line
        ):
            self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")


def _eos_logger() -> tuple[logging.Logger, _EosLog]:
    handler = _EosLog()
    logger = logging.getLogger(f"tests.chaos.librdkafka.{id(handler)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    return logger, handler


def _error(error: KafkaError | KafkaException | BufferError) -> ClientError:
    if isinstance(error, KafkaException):
        error = error.args[0] if error.args and isinstance(error.args[0], KafkaError) else error
    if isinstance(error, KafkaError):
        return ClientError(f"{error.name()}: {error.str()}", error.code() in _REFUSALS)
    return ClientError(str(error))


class KafkaClients:
    name = "confluent"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap  # the brokers' Kafka listeners

    def producer(self, delivery_timeout_ms: int = 60_000) -> ChaosProducer:
        logger, eos = _eos_logger()
        return _KafkaProducer(
            Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": "chaos-producer",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "request.timeout.ms": 5000,
                    "delivery.timeout.ms": delivery_timeout_ms,
                    "partitioner": "murmur2_random",
                    **COMMON,
                    "debug": "eos,msg",
                    "log_level": 7,
                },
                logger=logger,
            ),
            eos,
        )

    def group_reader(self, topic: str, group: str) -> ChaosReader:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": "chaos-reader",
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 300,
                **COMMON,
            }
        )
        try:
            consumer.subscribe([topic])
        except KafkaException as exc:
            consumer.close()
            raise _error(exc) from exc
        return _KafkaReader(consumer)

    def read_all(self, topic: str, partitions: int, group: str) -> list[tuple[int, int, bytes]]:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": "chaos-final-read",
                "group.id": group,  # librdkafka wants one; assign() never joins it
                "enable.auto.commit": False,
                **COMMON,
            }
        )
        try:
            deadline = time.monotonic() + 60
            ends = {p: _high_watermark(consumer, topic, p, deadline) for p in range(partitions)}
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            next_offset = dict.fromkeys(range(partitions), 0)
            out: list[tuple[int, int, bytes]] = []
            while any(next_offset[p] < ends[p] for p in range(partitions)):
                if time.monotonic() > deadline:
                    stuck = [p for p in range(partitions) if next_offset[p] < ends[p]]
                    raise TimeoutError(f"final read stuck in partitions {stuck}")
                for message in consumer.consume(num_messages=1000, timeout=0.5):
                    if message.error() is not None:
                        continue  # a broker down for a moment: librdkafka retries
                    partition, offset = message.partition(), message.offset()
                    out.append((partition, offset, message.value()))
                    next_offset[partition] = offset + 1
            return out
        finally:
            consumer.close()


def _high_watermark(consumer: Consumer, topic: str, partition: int, deadline: float) -> int:
    while True:
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=5, cached=False
            )
            return int(high)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class _KafkaProducer:
    def __init__(self, producer: Producer, eos: _EosLog) -> None:
        self.producer = producer
        self.eos = eos

    def send(
        self,
        topic: str,
        value: bytes,
        on_done: OnDone,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> None:
        def report(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                on_done(-1, -1, _error(error))
                return
            # None: librdkafka knows the record was written but not where (checker.py)
            offset = message.offset()
            on_done(message.partition(), -1 if offset is None else offset, None)

        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        try:
            self.producer.produce(topic, value, key, on_delivery=report, **extra)
        except (KafkaException, BufferError) as exc:
            raise _error(exc) from exc
        finally:
            self.producer.poll(0)

    def close(self, timeout_s: float) -> None:
        left = self.producer.flush(timeout_s)
        for line in self.eos.lines:
            print(f"librdkafka producer: {line}", file=sys.stderr)
        if left:
            raise ClientError(f"{left} records still unacknowledged after {timeout_s} s")


class _KafkaReader:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.positions: dict[tuple[str, int], int] = {}

    def poll(self, timeout_s: float) -> Polled:
        try:
            messages = self.consumer.consume(num_messages=500, timeout=timeout_s)
        except KafkaException as exc:
            raise _error(exc) from exc
        polled: Polled = {}
        errors = []
        for message in messages:
            if message.error() is not None:
                errors.append(message.error())
                continue
            tp = (message.topic(), message.partition())
            polled.setdefault(tp, []).append((message.offset(), message.value()))
            self.positions[tp] = message.offset() + 1
        if errors and not polled:
            raise _error(errors[0])
        return polled

    def commit(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        try:
            owned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
            offsets = [
                TopicPartition(t, p, self.positions[(t, p)])
                for t, p in partitions
                if (t, p) in owned
            ]
            if not offsets:
                return {}
            answered = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            raise _error(exc) from exc
        failed = [tp.error for tp in answered or () if tp.error is not None]
        if failed:
            raise _error(failed[0])
        return {(tp.topic, tp.partition): tp.offset for tp in offsets}

    def close(self) -> None:
        # A reader closes at the run's end, possibly against a node the nemesis took
        # down: its leave-group may fail, and the group then expires the member.
        with contextlib.suppress(KafkaException):
            self.consumer.close()
