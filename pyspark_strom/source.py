"""`DefaultSource`, the data source Spark finds as format "strom", and its batch reader.

Spark calls schema() when a read is defined (`.load()`), reader() / streamReader() when it
plans, and pickles the reader to each task: readers keep options and plain values only and
open their channels inside each call (planning in partitions(), reading in read()).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from pyspark_strom.options import Options, client_tls_of, parse_options, parse_write_options
from pyspark_strom.planning import OffsetRange, batch_ranges, split
from pyspark_strom.reading import TaskSettings, read_offset_range
from pyspark_strom.schema import read_schema
from pyspark_strom.streaming import StromStreamReader
from pyspark_strom.writing import StromStreamWriter, StromWriter, check_write_schema
from strom.errors import StromError
from strom.range_reader import SyncCluster
from strom_api.error_codes import ErrorCode


class StromBatchReader(DataSourceReader):
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.settings = TaskSettings(
            opts.bootstrap,
            opts.request_timeout_ms,
            opts.include_headers,
            opts.fail_on_data_loss,
            opts.fetch_bytes,
            opts.security,
        )

    def partitions(self) -> Sequence[InputPartition]:
        with SyncCluster(
            self.opts.bootstrap, self.opts.request_timeout_ms, tls=client_tls_of(self.opts.security)
        ) as cluster:
            ranges = batch_ranges(cluster, self.opts)
        return split(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark reads one empty partition when planning gave none
        return read_offset_range(self.settings, partition)


class DefaultSource(DataSource):
    """`spark.read.format("strom")`, `readStream`, `write` and `writeStream`, with the
    options of Spark's Kafka source (see README.md, "Reading with Spark")."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def schema(self) -> StructType:
        # Checked here so that a bad option fails at .load(), before any job runs. Spark asks
        # for the schema of batch and streaming reads alike: options valid for either pass
        # here, and reader() / streamReader() check them for the query's kind.
        try:
            opts = parse_options(self.options)
        except StromError as batch_error:
            try:
                opts = parse_options(self.options, streaming=True)
            except StromError:
                raise batch_error from None
        return read_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return StromBatchReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StromStreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            # Spark's Kafka sink refuses Overwrite too: records are appended to a topic, never
            # replace it. (Its default, ErrorIfExists, Spark 4 refuses for every Python data
            # source before the connector is asked: `.mode("append")` is needed; README.md.)
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "Save mode Overwrite not allowed for strom: records are appended to a topic, "
                'never replace it. Use .mode("append").',
            )
        opts = parse_write_options(self.options)
        check_write_schema(schema, opts)
        return StromWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_write_options(self.options)
        check_write_schema(schema, opts)
        return StromStreamWriter(opts)
