"""Async twins of the client classes, for code running on its own asyncio event loop, in
aiokafka's shape:

    producer = AIOProducer(bootstrap_servers="127.0.0.1:9092")
    await producer.start()
    future = await producer.send("events", b"value")     # queued; await future for its offset
    metadata = await producer.send_and_wait("events", b"value")
    await producer.stop()

    consumer = AIOConsumer("events", bootstrap_servers=..., group_id="billing")
    await consumer.start()
    async for record in consumer: ...                     # or await consumer.getmany(...)
    await consumer.commit(); await consumer.stop()

They fall out of the synchronous classes rather than being a second client: the network
work already runs on the client's own I/O thread, so a twin only keeps the caller's loop
from blocking. Answers come back as asyncio futures (settled through call_soon_threadsafe,
no thread per record); calls that can wait (a poll, a commit, a send into a full
buffer.memory or to a topic not known yet, admin requests) run in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from strom.admin import AdminClient
from strom.consumer import Consumer, ConsumerRecord, TopicPartition
from strom.errors import ClientErrorName, ClosedError, StromError
from strom.producer import FutureRecordMetadata, Producer, RecordMetadata

__all__ = ["AIOAdminClient", "AIOConsumer", "AIOProducer"]


class AIOProducer:
    def __init__(self, **config: Any) -> None:
        self._config = config
        self._producer: Producer | None = None

    async def start(self) -> None:
        """Connects (the first metadata request), off the event loop."""
        self._producer = await asyncio.to_thread(Producer, **self._config)

    def _sync(self) -> Producer:
        if self._producer is None:
            raise ClosedError("the producer (not started)")
        return self._producer

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queues the record; the returned future settles with its RecordMetadata."""
        producer = self._sync()
        args = (topic, value, key, headers, partition, timestamp_ms)
        if producer.can_send_now(topic):
            record_future = producer.send(*args)
        else:  # it may wait for metadata or for room in buffer.memory
            record_future = await asyncio.to_thread(producer.send, *args)
        return _to_asyncio(record_future)

    async def send_and_wait(self, topic: str, value: Any = None, **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, **kwargs))

    async def flush(self) -> None:
        await asyncio.to_thread(self._sync().flush)

    async def stop(self) -> None:
        if self._producer is not None:
            await asyncio.to_thread(self._producer.close)

    async def __aenter__(self) -> AIOProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _to_asyncio(record_future: FutureRecordMetadata) -> asyncio.Future[RecordMetadata]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[RecordMetadata] = loop.create_future()

    def settle(done: FutureRecordMetadata) -> None:
        if future.done():
            return
        error = done.exception()
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())

    # The callback runs on the client's I/O thread: hand the outcome to the caller's loop.
    record_future.add_done_callback(lambda done: loop.call_soon_threadsafe(settle, done))
    return future


class AIOConsumer:
    def __init__(self, *topics: str, **config: Any) -> None:
        self._topics = topics
        self._config = config
        self._consumer: Consumer | None = None

    async def start(self) -> None:
        self._consumer = await asyncio.to_thread(Consumer, *self._topics, **self._config)

    def _sync(self) -> Consumer:
        if self._consumer is None:
            raise ClosedError("the consumer (not started)")
        return self._consumer

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    async def getmany(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """poll(): records per partition, waiting up to timeout_ms."""
        consumer = self._sync()
        return await asyncio.to_thread(consumer.poll, timeout_ms, max_records)

    async def getone(self) -> ConsumerRecord:
        while True:
            batches = await self.getmany(timeout_ms=1000, max_records=1)
            for records in batches.values():
                return records[0]

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._records()

    async def _records(self) -> AsyncIterator[ConsumerRecord]:
        while True:
            for records in (await self.getmany(timeout_ms=1000)).values():
                for record in records:
                    yield record

    async def subscribe(
        self, topics: Any = (), pattern: str | None = None, listener: Any = None
    ) -> None:
        await self._call(self._sync().subscribe, topics, pattern, listener)

    async def assign(self, partitions: Any) -> None:
        await self._call(self._sync().assign, partitions)

    async def seek(self, partition: TopicPartition, offset: int) -> None:
        await self._call(self._sync().seek, partition, offset)

    async def position(self, partition: TopicPartition) -> int:
        consumer = self._sync()
        return await asyncio.to_thread(consumer.position, partition)

    async def commit(self, offsets: Any = None) -> None:
        await self._call(self._sync().commit, offsets)

    async def committed(self, partition: TopicPartition) -> int | None:
        consumer = self._sync()
        return await asyncio.to_thread(consumer.committed, partition)

    def assignment(self) -> set[TopicPartition]:
        return self._sync().assignment()

    async def stop(self) -> None:
        if self._consumer is not None:
            await asyncio.to_thread(self._consumer.close)

    async def __aenter__(self) -> AIOConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class AIOAdminClient:
    """Every AdminClient method, awaited: `await admin.list_topics()`."""

    def __init__(self, **config: Any) -> None:
        self._config = config
        self._admin: AdminClient | None = None

    async def start(self) -> None:
        self._admin = await asyncio.to_thread(AdminClient, **self._config)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or not callable(getattr(AdminClient, name, None)):
            raise AttributeError(f"'AIOAdminClient' object has no attribute '{name}'")
        if self._admin is None:
            # As AIOProducer and AIOConsumer (aiokafka's shape): no I/O before start(), and
            # a call before it says so rather than failing as a missing attribute.
            raise StromError(
                ClientErrorName.ILLEGAL_STATE,
                f"AIOAdminClient.{name}() before start(): await admin.start() first, or use "
                "'async with AIOAdminClient(...) as admin'",
            )
        method = getattr(self._admin, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def close(self) -> None:
        if self._admin is not None:
            await asyncio.to_thread(self._admin.close)

    async def __aenter__(self) -> AIOAdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
