"""RecordBatch v2 record codec: ours against kafka-python's `kafka.record` in the same run.

    python bench/bench_record_codec.py [--quick]

docs/architecture.md §2 asks for this measurement before we keep a codec of our own.
Both sides encode and decode the same records (1,000 records of 100-byte values with 8-byte keys, no
compression, then each codec), timed as the median of several runs. Brokers never decode
records; this is the client and log-cleaner cost. "decode" is decode_batch as shipped (records
read by aiokafka's C reader when installed, strom_api/native_records.py), "decode-py" our
Python decoder alone (decode_batch_portable).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from strom_api import compression
from strom_api.records import Record, decode_batch, decode_batch_portable, encode_batch

TS = 1_700_000_000_000


def median_seconds(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kafka_python_encode(records: list[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for r in records:
        builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=[])
    return bytes(builder.build())


def kafka_python_decode(data: bytes) -> int:
    return sum(1 for _ in DefaultRecordBatch(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    reps = 3 if parser.parse_args().quick else 15
    records = [Record(i, TS + i, b"key-%04d" % i, os.urandom(100)) for i in range(1000)]
    n = len(records)
    print(f"{n} records of 100 B, median of {reps} runs; ratio = kafka-python time / ours")
    print(f"{'codec':8} {'op':7} {'ours rec/s':>12} {'kafka-python rec/s':>19} {'ratio':>6}")
    for codec, name in compression.NAMES.items():
        ours_bytes = encode_batch(records, compression_codec=codec)
        theirs_bytes = kafka_python_encode(records, codec)
        pairs = {
            "encode": (
                partial(encode_batch, records, compression_codec=codec),
                partial(kafka_python_encode, records, codec),
            ),
            "decode": (
                partial(decode_batch, ours_bytes),
                partial(kafka_python_decode, theirs_bytes),
            ),
            "decode-py": (
                partial(decode_batch_portable, ours_bytes),
                partial(kafka_python_decode, theirs_bytes),
            ),
        }
        for op, (ours, theirs) in pairs.items():
            t_ours, t_theirs = median_seconds(ours, reps), median_seconds(theirs, reps)
            print(
                f"{name:8} {op:7} {n / t_ours:12,.0f} {n / t_theirs:19,.0f} "
                f"{t_theirs / t_ours:6.2f}"
            )


if __name__ == "__main__":
    main()
