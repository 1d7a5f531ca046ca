"""What a Spark task does with one OffsetRange: open its own channels, fetch the range from
the partition's leader and yield Arrow record batches; close everything when done."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from pyspark_strom.arrow_records import decode_to_arrow
from pyspark_strom.options import Security, client_tls_of
from pyspark_strom.planning import OffsetRange, data_loss
from pyspark_strom.schema import arrow_schema, read_schema
from strom.errors import StromError
from strom.range_reader import EARLIEST, SyncCluster, TopicPartition, read_range
from strom_api.error_codes import ErrorCode


@dataclass(frozen=True)
class TaskSettings:
    """What a task needs besides its range: plain values, picklable."""

    bootstrap: str
    request_timeout_ms: int
    include_headers: bool
    fail_on_data_loss: bool
    fetch_bytes: int
    security: Security = ()  # the clients' TLS settings (pyspark_strom/options.py)


def read_offset_range(settings: TaskSettings, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    schema = arrow_schema(read_schema(settings.include_headers))
    tp = TopicPartition(r.topic, r.partition)
    position = r.start
    with SyncCluster(
        settings.bootstrap, settings.request_timeout_ms, tls=client_tls_of(settings.security)
    ) as cluster:
        while position < r.end:
            try:
                chunks = read_range(cluster, tp, position, r.end, max_bytes=settings.fetch_bytes)
                for chunk in chunks:
                    batch = decode_to_arrow(
                        chunk.data, r.topic, r.partition, position, r.end, schema
                    )
                    position = chunk.next_offset
                    if batch is not None and batch.num_rows:
                        yield batch
            except StromError as exc:
                if exc.name != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                log_start = cluster.list_offsets({tp: EARLIEST})[tp][0]
                if log_start <= position:
                    raise
                if settings.fail_on_data_loss:
                    raise data_loss(tp, position, log_start) from None
                position = log_start
