"""The producer: kafka-python's KafkaProducer shape with Kafka's config names in snake_case.

    producer = Producer(bootstrap_servers="127.0.0.1:9092", acks="all")
    future = producer.send("events", b"value", key=b"user-1")
    metadata = future.get(timeout=10)          # or future.result(10)
    producer.flush(); producer.close()

`send` returns at once with a future of RecordMetadata(topic, partition, offset, timestamp);
records are batched per partition (`batch_size`, `linger_ms`) and sent by the process's
I/O thread (strom._loop_thread), every ready batch of a broker's partitions in one Produce
request (strom.produce_requests). Partitioning is Kafka's Java client's (strom.partitioner:
murmur2 of the key, KIP-794's uniform sticky partitioner for keyless records). Idempotence
is on by default with acks=all, as in Kafka 3+: retries never duplicate or reorder records
of a partition.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable
from typing import Any

from strom._loop_thread import shared_loop
from strom.accumulator import RecordAccumulator
from strom.cluster import Cluster, parse_bootstrap
from strom.errors import ClosedError, KafkaTimeoutError, StromError
from strom.partitioner import LeaderWaits, UniformStickyPartitioner, partition_for_key
from strom.record_future import FutureRecordMetadata, RecordMetadata
from strom.security import client_security
from strom.sender import Sender, SenderConfig
from strom_api import compression
from strom_api.error_codes import ErrorCode
from strom_api.idempotence import MAX_IN_FLIGHT_IDEMPOTENT

__all__ = ["FutureRecordMetadata", "Producer", "RecordMetadata"]

Partitioner = Callable[[bytes | None, list[int], list[int]], int]


def _as_bytes(what: str, data: Any) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise StromError(
        ErrorCode.INVALID_RECORD,
        f"the {what} must be bytes (or give a {what}_serializer), not {type(data).__name__}",
    )


def _acks(value: str | int) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise StromError(ErrorCode.INVALID_CONFIG, f"acks must be 0, 1, all or -1, not {value!r}")


def _compression(name: str | None) -> int:
    key = "none" if name is None else str(name).lower()
    if key not in compression.BY_NAME:
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"compression_type must be None, gzip, snappy, lz4 or zstd, not {name!r}",
        )
    return compression.BY_NAME[key]


class Producer:
    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        *,
        client_id: str = "strom-producer",
        acks: str | int = "all",
        enable_idempotence: bool | None = None,
        linger_ms: int = 5,
        batch_size: int = 16384,
        compression_type: str | None = None,
        retries: int = 2**31 - 1,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        max_in_flight_requests_per_connection: int = 5,
        max_request_size: int = 1024 * 1024,
        max_block_ms: int = 60_000,
        buffer_memory: int = 32 * 1024 * 1024,
        metadata_max_age_ms: int = 300_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: Any = None,
        partitioner: Partitioner | None = None,
        partitioner_adaptive_partitioning_enable: bool = True,
        partitioner_availability_timeout_ms: int = 0,
        partitioner_ignore_keys: bool = False,
        key_serializer: Callable[[Any], bytes | None] | None = None,
        value_serializer: Callable[[Any], bytes | None] | None = None,
    ) -> None:
        acks_value = _acks(acks)
        if enable_idempotence is None:
            # Kafka 3+: on by default, quietly off when the other settings rule it out.
            enable_idempotence = acks_value == -1 and retries > 0
        elif enable_idempotence and acks_value != -1:
            raise StromError(
                ErrorCode.INVALID_CONFIG, "enable_idempotence=True needs acks='all' (Kafka's rule)"
            )
        if max_in_flight_requests_per_connection < 1:
            raise StromError(
                ErrorCode.INVALID_CONFIG, "max_in_flight_requests_per_connection must be >= 1"
            )
        if enable_idempotence and max_in_flight_requests_per_connection > MAX_IN_FLIGHT_IDEMPOTENT:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "enable_idempotence=True needs max_in_flight_requests_per_connection <= "
                f"{MAX_IN_FLIGHT_IDEMPOTENT}",
            )
        if linger_ms < 0 or batch_size < 0 or request_timeout_ms <= 0:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "linger_ms and batch_size must be >= 0, request_timeout_ms > 0",
            )
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "delivery_timeout_ms should be equal to or larger than linger_ms + "
                "request_timeout_ms (Kafka's rule)",
            )
        self.client_id = client_id
        self.max_request_size = max_request_size
        self.max_block_s = max_block_ms / 1000
        self.partitioner = partitioner
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        if partitioner_availability_timeout_ms < 0:
            raise StromError(
                ErrorCode.INVALID_CONFIG, "partitioner_availability_timeout_ms must be >= 0"
            )
        self._sticky = UniformStickyPartitioner(
            batch_size, adaptive=partitioner_adaptive_partitioning_enable
        )
        self._ignore_keys = partitioner_ignore_keys
        self._leader_waits = LeaderWaits(partitioner_availability_timeout_ms / 1000)
        self._closed = False
        self._io = shared_loop()
        if buffer_memory < 1:
            raise StromError(ErrorCode.INVALID_CONFIG, "buffer_memory must be >= 1")
        if reconnect_backoff_ms < 0 or reconnect_backoff_max_ms < 0:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "reconnect_backoff_ms and reconnect_backoff_max_ms must be >= 0",
            )
        self._accumulator = RecordAccumulator(batch_size, linger_ms, buffer_memory, max_block_ms)
        config = SenderConfig(
            acks=acks_value,
            idempotent=enable_idempotence,
            retries=retries,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            compression=_compression(compression_type),
            max_in_flight=max_in_flight_requests_per_connection,
            max_request_size=max_request_size,
            client_id=client_id,
        )
        bootstrap = parse_bootstrap(
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )
        tls = client_security(
            security_protocol,
            ssl_cafile,
            ssl_certfile,
            ssl_keyfile,
            ssl_password,
            ssl_check_hostname,
            sasl_mechanism,
            sasl_plain_username,
            sasl_plain_password,
            sasl_oauth_token_provider,
        )

        async def build() -> tuple[Cluster, Sender]:
            cluster = Cluster(
                bootstrap,
                request_timeout_ms,
                retry_backoff_ms,
                metadata_max_age_ms,
                reconnect_backoff_ms,
                reconnect_backoff_max_ms,
                tls,
            )
            sender = Sender(cluster, self._accumulator, config)
            sender.start()
            return cluster, sender

        self._cluster, self._sender = self._io.run(build())
        self._sender.on_drained = self._drained

    # --- sending --------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queues one record; the future settles when the broker answers (or the record
        cannot be delivered within delivery_timeout_ms)."""
        if self._closed:
            raise ClosedError("the producer")
        if value is None and key is None:
            raise StromError(
                ErrorCode.INVALID_RECORD, "a record needs a value or a key (None both)"
            )
        key_bytes = self.key_serializer(key) if self.key_serializer else key
        value_bytes = self.value_serializer(value) if self.value_serializer else value
        # Checks ordered for the common case (bytes already): this runs once per record.
        if key_bytes is not None and type(key_bytes) is not bytes:
            key_bytes = _as_bytes("key", key_bytes)
        if value_bytes is not None and type(value_bytes) is not bytes:
            value_bytes = _as_bytes("value", value_bytes)
        header_tuple = (
            tuple((str(k), None if v is None else bytes(v)) for k, v in headers) if headers else ()
        )
        size = 85  # batch and record overheads (61 + 24)
        if key_bytes is not None:
            size += len(key_bytes)
        if value_bytes is not None:
            size += len(value_bytes)
        if size > self.max_request_size:
            raise StromError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The message is {size} bytes when serialized which is larger than "
                f"max_request_size ({self.max_request_size}).",
            )
        info = self._cluster.topics.get(topic)
        if info is None or not info.partitions:
            info = self._io.run(self._cluster.topic(topic, self.max_block_s, auto_create=True))
        sticky = False
        if partition is not None:
            if partition >= len(info.partitions):
                # Kafka's waitOnMetadata: a partition just added may not be in the metadata
                # learned yet; wait for it up to max.block.ms, then time out.
                info = self._io.run(
                    self._cluster.topic(topic, self.max_block_s, partitions=partition + 1)
                )
            if not 0 <= partition < len(info.partitions):
                raise StromError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {partition} of topic '{topic}' does not exist "
                    f"({len(info.partitions)} partitions)",
                )
        elif self.partitioner is not None:
            partition = self.partitioner(key_bytes, sorted(info.partitions), info.available)
        elif key_bytes is not None and not self._ignore_keys:
            partition = partition_for_key(key_bytes, len(info.partitions))
        else:
            partition = self._sticky.partition(topic, len(info.partitions), info.available)
            sticky = True
        timestamp = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        future, wake, size, full = self._accumulator.append(
            topic, partition, timestamp, key_bytes, value_bytes, header_tuple
        )
        if sticky:
            self._sticky.appended(topic, partition, size, full)
        if wake and not self._sender.wake_pending:
            self._sender.wake_pending = True
            self._io.loop.call_soon_threadsafe(self._sender.wake)
        return future

    def can_send_now(self, topic: str) -> bool:
        """Whether send() to `topic` returns without waiting: its metadata is known and
        buffer.memory has room for a full batch (strom.aio sends from its loop then)."""
        info = self._cluster.topics.get(topic)
        return (
            info is not None
            and bool(info.partitions)
            and self._accumulator.has_room(self._accumulator.batch_size)
        )

    def _drained(self, queued: dict[tuple[str, int], int], drained: set[tuple[str, int]]) -> None:
        """On the I/O thread after each drain: the partitioner's load stats (Kafka's
        RecordAccumulator.ready feeding BuiltInPartitioner.updatePartitionLoadStats)."""
        if not self._sticky.adaptive:
            return
        now = time.monotonic()
        cluster, waits = self._cluster, self._leader_waits
        waits.looked(now)
        took = {cluster.leader(*tp) for tp in drained}
        for leader in {cluster.leader(*tp) for tp in queued}:
            waits.observed(leader, leader in took, now)
        for topic in {t for t, _ in queued} | set(self._sticky.loaded_topics()):
            info = cluster.topics.get(topic)
            if info is None:
                continue
            sizes = [
                (partition, queued.get((topic, partition), 0))
                for partition, state in sorted(info.partitions.items())
                if state.leader >= 0 and not waits.stalled(state.leader)
            ]
            self._sticky.update_load(topic, sizes, len(info.partitions))

    def partitions_for(self, topic: str) -> set[int]:
        info = self._io.run(self._cluster.topic(topic, self.max_block_s, auto_create=True))
        return set(info.partitions)

    # --- lifecycle ------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued and waits for every answer."""
        if self._closed:
            return
        try:
            self._io.run(self._sender.flush(), timeout)
        except concurrent.futures.TimeoutError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout} s") from None

    def close(self, timeout: float | None = None) -> None:
        """Flushes (up to `timeout`), then fails what is left and releases the channels."""
        if self._closed:
            return
        self._closed = True

        async def shut() -> None:
            await self._sender.close(timeout)
            await self._cluster.close()

        self._io.run(shut())

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
