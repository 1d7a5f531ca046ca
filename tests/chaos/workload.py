"""What runs against the cluster while faults are injected, and what it records.

- Producers: threads with an idempotent acks=all Producer each, writing unique values
  "<producer>:<seq>" (keyed, so every partition gets a steady stream), recording each
  acknowledged record's partition, offset, send and ack time.
- Group readers: consumers of one group committing after every poll, recording what they
  read and every offset they committed (after the commit returned).
- A controller watch: every node's ActiveControllerCount and Raft epoch, scraped in rounds.
- Admin churn: new topics created (and written to) during faults, and the main topic's
  partitions reassigned to another replica order with a preferred leader election, so
  leadership moves under load.
- The final read: a fresh consumer reading every partition from its log start to its end.

The producers, group readers and final read use a Clients (clients.py): Strom's own client
over gRPC, or confluent-kafka over the Kafka protocol listener (kafka_clients.py). The admin
churn always uses Strom's AdminClient. On a secured cluster (secured.py) every refusal the
workload meets, of its login or by the authorizer, is recorded: its users hold what they
need, so a refusal is a fault that broke a session or the authorizer (the checker counts it).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from strom.consumer import Consumer, TopicPartition
from strom.errors import AuthenticationError, AuthorizationError, StromError
from strom.producer import Producer
from tests.chaos.clients import ChaosReader, ClientError, Clients, OnDone

GROUP_PREFIX = "chaos-"  # every group the workload uses (its user reads them by prefix)
GROUP = GROUP_PREFIX + "readers"


@dataclass
class Ack:
    value: bytes
    partition: int
    offset: int
    sent: float
    acked: float


@dataclass
class Recorder:
    """Everything the workload saw, appended from its threads."""

    acks: list[Ack] = field(default_factory=list)
    failed_sends: int = 0
    reads: list[tuple[float, str, int, int, bytes]] = field(default_factory=list)
    commits: list[tuple[float, str, int, int, str]] = field(default_factory=list)
    controller_rounds: list[tuple[float, dict[int, tuple[float, float]]]] = field(
        default_factory=list
    )
    errors: list[str] = field(default_factory=list)
    # Admin churn: records acknowledged in topics created during the run, (topic, ack).
    churn_acks: list[tuple[str, Ack]] = field(default_factory=list)
    topics_created: int = 0
    reassignments: int = 0
    # Authentication and authorization refusals, every one (the others are capped above).
    refused: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _note_refusal(rec: Recorder, error: BaseException, where: str) -> None:
    """Called with rec.lock held."""
    refused = error.refused if isinstance(error, ClientError) else False
    if refused or isinstance(error, AuthenticationError | AuthorizationError):
        rec.refused.append(f"{where}: {error}")


class Producers:
    def __init__(self, clients: Clients, topic: str, count: int, rate: float, rec: Recorder):
        self.clients, self.topic, self.rate, self.rec = clients, topic, rate, rec
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)
        ]
        self.sent = 0

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _run(self, index: int) -> None:
        producer = self.clients.producer(delivery_timeout_ms=60_000)
        interval = 1 / self.rate
        seq = 0
        next_at = time.monotonic()
        try:
            while not self.stop.is_set():
                value = b"%d:%d" % (index, seq)
                sent = time.monotonic()
                try:
                    producer.send(
                        self.topic, value, self._on_done(value, sent), key=b"%d" % (seq % 24)
                    )
                except ClientError as exc:
                    self._failed(f"send: {exc}", exc)
                    continue
                seq += 1
                with self.rec.lock:
                    self.sent += 1
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                else:
                    next_at = time.monotonic()
        finally:
            try:
                producer.close(timeout_s=70)
            except ClientError as exc:
                self._failed(f"flush: {exc}", exc)

    def _on_done(self, value: bytes, sent: float) -> OnDone:
        def done(partition: int, offset: int, error: ClientError | None) -> None:
            if error is not None:
                self._failed(str(error), error)
                return
            with self.rec.lock:
                self.rec.acks.append(Ack(value, partition, offset, sent, time.monotonic()))

        return done

    def _failed(self, why: str, error: BaseException) -> None:
        with self.rec.lock:
            _note_refusal(self.rec, error, "producer")
            self.rec.failed_sends += 1
            if len(self.rec.errors) < 20:
                self.rec.errors.append(why)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(90)


class GroupReaders:
    def __init__(self, clients: Clients, topic: str, count: int, rec: Recorder):
        self.clients, self.topic, self.rec = clients, topic, rec
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(f"reader-{i}",), daemon=True)
            for i in range(count)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _run(self, name: str) -> None:
        reader: ChaosReader | None = None
        while not self.stop.is_set():
            try:
                if reader is None:
                    reader = self.clients.group_reader(self.topic, GROUP)
                batches = reader.poll(timeout_s=0.2)
                now = time.monotonic()
                with self.rec.lock:
                    for (topic, partition), records in batches.items():
                        self.rec.reads.extend(
                            (now, topic, partition, offset, value) for offset, value in records
                        )
                if batches:
                    positions = reader.commit(batches)
                    now = time.monotonic()
                    with self.rec.lock:
                        self.rec.commits.extend(
                            (now, topic, partition, pos, name)
                            for (topic, partition), pos in positions.items()
                        )
            except ClientError as exc:
                # Rebalances and faults: the next poll rejoins; what was read but not
                # committed is read again (at-least-once), which the checker allows.
                with self.rec.lock:
                    _note_refusal(self.rec, exc, name)
                    if len(self.rec.errors) < 20:
                        self.rec.errors.append(f"{name}: {exc}")
                time.sleep(0.1)
        if reader is not None:
            reader.close()

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


class AdminChurn:
    """Every couple of seconds: a new topic (3 partitions, RF 3) with a few acks=all records,
    then the main topic's next partition moved to a rotated replica order and its preferred
    leader elected. Failures while faults are on are expected and only counted."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rec: Recorder,
        security: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.partitions, self.rec = bootstrap, topic, partitions, rec
        self.security = security or {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.created: list[str] = []

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        from strom.admin import AdminClient, NewTopic

        admin = AdminClient(
            bootstrap_servers=self.bootstrap, request_timeout_ms=5000, **self.security
        )
        producer = Producer(self.bootstrap, acks="all", request_timeout_ms=5000, **self.security)
        n = 0
        try:
            while not self.stop.wait(2.0):
                name = f"{self.topic}-new-{n}"
                try:
                    admin.create_topics(
                        [NewTopic(name, 3, 3, topic_configs={"min.insync.replicas": "2"})]
                    )
                    self.created.append(name)
                    with self.rec.lock:
                        self.rec.topics_created += 1
                    for i in range(10):
                        value = b"%s:%d" % (name.encode(), i)
                        future = producer.send(name, value, partition=i % 3)
                        future.add_done_callback(self._on_done(name, value, time.monotonic()))
                except StromError as exc:
                    self._note(f"create {name}: {exc}", exc)
                n += 1
                partition = n % self.partitions
                try:
                    described = admin.describe_topics([self.topic])[0]
                    replicas = list(
                        next(p for p in described.partitions if p.partition == partition).replicas
                    )
                    rotated = replicas[1:] + replicas[:1]
                    admin.alter_partition_reassignments({(self.topic, partition): rotated})
                    admin.elect_leaders("preferred", [(self.topic, partition)])
                    with self.rec.lock:
                        self.rec.reassignments += 1
                except (StromError, StopIteration) as exc:
                    self._note(f"reassign {self.topic}-{partition}: {exc}", exc)
        finally:
            try:
                producer.flush(timeout=60)
            except StromError as exc:
                self._note(f"churn flush: {exc}", exc)
            producer.close()
            admin.close()

    def _on_done(self, topic: str, value: bytes, sent: float) -> Any:
        def done(future: Any) -> None:
            error = future.exception()
            if error is not None:
                self._note(f"churn send: {error}", error)
                return
            md = future.result()
            with self.rec.lock:
                self.rec.churn_acks.append(
                    (topic, Ack(value, md.partition, md.offset, sent, time.monotonic()))
                )

        return done

    def _note(self, why: str, error: BaseException) -> None:
        with self.rec.lock:
            _note_refusal(self.rec, error, "admin churn")
            if len(self.rec.errors) < 40:
                self.rec.errors.append(why)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(90)


class ControllerWatch:
    """Rounds of scrapes: {node: (ActiveControllerCount, Raft epoch)} per round."""

    def __init__(self, metrics: dict[int, str], live: Any, rec: Recorder):
        self.metrics, self.live, self.rec = metrics, live, rec  # node -> host:port
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.25):
            seen: dict[int, tuple[float, float]] = {}
            for node in self.live():
                sample = _controller_sample(self.metrics[node])
                if sample is not None:
                    seen[node] = sample
            with self.rec.lock:
                self.rec.controller_rounds.append((time.monotonic(), seen))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


def _controller_sample(address: str) -> tuple[float, float] | None:
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=0.5) as r:
            text = r.read().decode()
    except OSError:
        return None  # down or paused
    active = epoch = None
    for line in text.splitlines():
        if line.startswith("kafka_controller_kafkacontroller_activecontrollercount "):
            active = float(line.split()[-1])
        elif line.startswith("kafka_server_raftmetrics_current_epoch "):
            epoch = float(line.split()[-1])
    if active is None or epoch is None:
        return None
    return active, epoch


def read_topics(
    bootstrap: str, topics: list[str], security: dict[str, Any] | None = None
) -> dict[str, list[tuple[int, int, bytes]]]:
    """Every record of each topic (its partitions assigned, from the beginning to the end
    offsets seen first)."""
    out: dict[str, list[tuple[int, int, bytes]]] = {}
    with Consumer(
        bootstrap_servers=bootstrap, request_timeout_ms=10_000, **(security or {})
    ) as consumer:
        for topic in topics:
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
            consumer.assign(tps)
            ends = consumer.end_offsets(tps)
            consumer.seek_to_beginning(*tps)
            records: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + 30
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic} got stuck")
                for tp, batch in consumer.poll(timeout_ms=300).items():
                    records.extend((tp.partition, r.offset, r.value) for r in batch)
            out[topic] = records
    return out


def read_replicas(
    client: Any, topic: str, partitions: int, timeout_s: float = 30
) -> dict[int, dict[int, dict[int, bytes]]]:
    """{partition: {broker: {offset: value}}}: every replica's records up to its own high
    watermark (Kafka's debugging-consumer fetch), once the replicas' high watermarks agree
    and every replica answers (or `timeout_s` passed). A broker restarted by the final heal
    can be registered, so unfenced, and still refuse calls UNAVAILABLE until it has caught up
    with the metadata log: it is asked again."""
    import grpc

    from strom_api.records import decode_batches

    deadline = time.monotonic() + timeout_s
    out: dict[int, dict[int, dict[int, bytes]]] = {}
    for partition in range(partitions):
        meta = client.metadata([topic]).topics[0]
        replicas = list(next(p for p in meta.partitions if p.partition == partition).replicas)
        while True:
            views: dict[int, dict[int, bytes]] = {}
            marks = set()
            starting = False
            for broker in replicas:
                view: dict[int, bytes] = {}
                offset = 0
                while True:
                    try:
                        answer = client.fetch_raw(broker, topic, partition, offset, replica_id=-2)
                    except grpc.RpcError as exc:
                        if exc.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        starting = True
                        break
                    if answer.error.code != 0:
                        break
                    got = [r for _, batch in decode_batches(answer.records) for r in batch]
                    for r in got:
                        if r.offset >= offset:
                            view[r.offset] = r.value
                    if not got or got[-1].offset + 1 >= answer.high_watermark:
                        marks.add(answer.high_watermark)
                        break
                    offset = got[-1].offset + 1
                views[broker] = view
            out[partition] = views
            agree = len(marks) == 1 and len(views) == len(replicas) and not starting
            if agree or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    return out
