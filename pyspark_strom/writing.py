"""The write path (batch and streaming), as Spark's Kafka sink: a DataFrame with a `value`
column (string or binary, required) and optionally `key` (string or binary), `topic`
(string), `partition` (int) and `headers` (array<struct<key:string,value:binary>>). The
option `topic` names the topic for every row and wins over the `topic` column.

Each Spark task sends its rows through one idempotent producer (acks=all) and flushes before
it reports success, so a task that succeeded has every record in the log. Delivery is
at-least-once, exactly as with Spark's Kafka sink: a task that fails after some sends, or a
micro-batch replayed after a driver failure, is run again and sends those records again
(the producer's idempotence removes duplicates within one producer's retries only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from pyspark_strom.options import WriteOptions, invalid
from strom.errors import StromError
from strom.producer import Producer


@dataclass
class StromCommitMessage(WriterCommitMessage):
    records: int


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Spark's Kafka sink's rules on the DataFrame's columns."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise invalid("the DataFrame to write must have a 'value' column (string or binary)")
    for name in ("value", "key"):
        if name in types and not isinstance(types[name], StringType | BinaryType):
            raise invalid(
                f"column '{name}' must be string or binary, not {types[name].simpleString()}"
            )
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise invalid(f"column 'topic' must be string, not {types['topic'].simpleString()}")
    if opts.topic is None and "topic" not in types:
        raise invalid("give the option 'topic' or a 'topic' column to say where rows go")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise invalid(f"column 'partition' must be int, not {types['partition'].simpleString()}")
    if "headers" in types:
        headers = types["headers"]
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise invalid(
                "column 'headers' must be array<struct<key:string,value:binary>>, not "
                f"{headers.simpleString()}"
            )


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def produce(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> StromCommitMessage:
    """Sends every row, flushes, and raises the first failed send."""
    failures: list[BaseException] = []
    sent = 0
    settings: dict[str, Any] = {
        "acks": "all",
        "linger_ms": 5,
        "batch_size": 256 * 1024,
        "request_timeout_ms": opts.request_timeout_ms,
        "max_block_ms": opts.request_timeout_ms,
        "delivery_timeout_ms": max(120_000, opts.request_timeout_ms + 5),
    }
    settings.update(opts.producer)  # the query's kafka.* producer options win
    producer = Producer(opts.bootstrap, **settings, **dict(opts.security))
    try:
        for batch in batches:
            columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            values = columns["value"].to_pylist()
            keys = columns["key"].to_pylist() if "key" in columns else [None] * n
            topics = [opts.topic] * n if opts.topic is not None else columns["topic"].to_pylist()
            parts = columns["partition"].to_pylist() if "partition" in columns else [None] * n
            headers = columns["headers"].to_pylist() if "headers" in columns else [None] * n
            for value, key, topic, partition, header in zip(
                values, keys, topics, parts, headers, strict=True
            ):
                if topic is None:
                    raise invalid("a row has a null 'topic' and no option 'topic' was given")
                future = producer.send(
                    topic,
                    _bytes(value),
                    key=_bytes(key),
                    headers=[(h["key"], _bytes(h["value"])) for h in header or ()],
                    partition=partition,
                )
                future.add_errback(failures.append)
                sent += 1
            if failures:
                break
        producer.flush()
    finally:
        producer.close()
    if failures:
        error = failures[0]
        if isinstance(error, StromError):
            raise StromError(error.name, f"a record could not be written: {error.message}")
        raise error
    return StromCommitMessage(sent)


class StromWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StromCommitMessage:
        return produce(self.opts, iterator)


class StromStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StromCommitMessage:
        return produce(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass  # each task flushed its records before it reported success

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass  # records already sent stay: at-least-once, as Spark's Kafka sink
