"""Kafka wire-protocol codecs for issue 20's listener: kio against kafka-python's `kafka.protocol`.

    python bench/kafka_codecs.py [--quick]

Both libraries are generated from Kafka's own JSON message schemas. Each message below is built
once with kio, encoded, and decoded by kafka-python; a run first checks that each library decodes
the other's bytes and re-encodes them byte for byte, so both sides time the same wire bytes.
Then, per message: decode (bytes -> message object) and encode (object -> bytes), as µs per
message and messages/s, each the fastest of several samples taken in turn with the reference's.
The reference, timed in the same run, is what a listener does with a message before any codec:
a `bytes` copy of it (the copy out of the socket buffer) and a `struct.unpack_from` of its
request header's fixed part. The "x copy" columns are a codec's time over the copy's; "kp/kio"
is kafka-python's time over kio's (above 1: kio is faster).

Versions are those librdkafka (confluent-kafka 2.16) negotiates with a Kafka 4 broker:
ApiVersions v3, Produce v10, Fetch v16, Metadata v13 (docs/kafka_protocol.md has the table).
Record batches are built with strom_api.records and stay opaque bytes in both libraries.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kafka.protocol.consumer import FetchRequest as KpFetchRequest
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest
from kio.schema.api_versions.v3 import request as api_versions_request
from kio.schema.api_versions.v3 import response as api_versions_response
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16 import request as fetch_request
from kio.schema.fetch.v16 import response as fetch_response
from kio.schema.metadata.v13 import response as metadata_response
from kio.schema.produce.v10 import request as produce_request
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i8, i16, i32, i64

from strom_api.records import Record, encode_batch

TS = 1_700_000_000_000
REQUEST_HEADER_FIXED = struct.Struct(">hhi")  # api key, api version, correlation id


@dataclass(frozen=True)
class Case:
    name: str
    kio_obj: Any
    kp_class: Any
    version: int


def batch_of(total_bytes: int, value_size: int = 1000) -> bytes:
    n = max(1, total_bytes // (value_size + 20))
    return encode_batch([Record(i, TS + i, b"k%06d" % i, b"v" * value_size) for i in range(n)])


def produce(batch: bytes) -> Any:
    m = produce_request
    return m.ProduceRequest(
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            m.TopicProduceData(
                name=TopicName("orders"),
                partition_data=(m.PartitionProduceData(index=i32(0), records=Records(batch)),),
            ),
        ),
    )


def topic_ids(n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=0x5EED0000 + t) for t in range(n)]


def fetch_req(topics: int, partitions_per_topic: int) -> Any:
    m = fetch_request
    return m.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=i32(1),
        max_bytes=i32(52428800),
        isolation_level=i8(1),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=tuple(
            m.FetchTopic(
                topic_id=tid,
                partitions=tuple(
                    m.FetchPartition(
                        partition=i32(p),
                        current_leader_epoch=i32(3),
                        fetch_offset=i64(1_000_000 + p),
                        last_fetched_epoch=i32(3),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1048576),
                    )
                    for p in range(partitions_per_topic)
                ),
            )
            for tid in topic_ids(topics)
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def fetch_resp(topics: int, partitions_per_topic: int, batch: bytes) -> Any:
    m = fetch_response
    return m.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=i32(12345),
        responses=tuple(
            m.FetchableTopicResponse(
                topic_id=tid,
                partitions=tuple(
                    m.PartitionData(
                        partition_index=i32(p),
                        error_code=ErrorCode.none,
                        high_watermark=i64(2_000_000),
                        last_stable_offset=i64(2_000_000),
                        log_start_offset=i64(0),
                        aborted_transactions=(),
                        preferred_read_replica=BrokerId(-1),
                        records=Records(batch),
                    )
                    for p in range(partitions_per_topic)
                ),
            )
            for tid in topic_ids(topics)
        ),
    )


def metadata(topics: int, partitions_per_topic: int) -> Any:
    m = metadata_response
    brokers = tuple(
        m.MetadataResponseBroker(node_id=BrokerId(b), host=f"broker-{b}.local", port=i32(9192))
        for b in range(3)
    )
    return m.MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=brokers,
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        controller_id=BrokerId(0),
        topics=tuple(
            m.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(f"topic-{t}"),
                topic_id=tid,
                is_internal=False,
                partitions=tuple(
                    m.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=i32(p),
                        leader_id=BrokerId(p % 3),
                        leader_epoch=i32(7),
                        replica_nodes=tuple(BrokerId((p + r) % 3) for r in range(3)),
                        isr_nodes=tuple(BrokerId((p + r) % 3) for r in range(3)),
                        offline_replicas=(),
                    )
                    for p in range(partitions_per_topic)
                ),
            )
            for t, tid in enumerate(topic_ids(topics))
        ),
        error_code=ErrorCode.none,
    )


def api_versions_resp() -> Any:
    m = api_versions_response
    # About the size of a Kafka 4 broker's answer: 40 keys.
    return m.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            m.ApiVersion(api_key=i16(k), min_version=i16(0), max_version=i16(9)) for k in range(40)
        ),
        throttle_time=datetime.timedelta(0),
    )


def cases() -> list[Case]:
    small = batch_of(1024)
    return [
        Case(
            "ApiVersions request v3",
            api_versions_request.ApiVersionsRequest(
                client_software_name="confluent-kafka-python", client_software_version="2.16.1"
            ),
            KpApiVersionsRequest,
            3,
        ),
        Case("ApiVersions response v3", api_versions_resp(), KpApiVersionsResponse, 3),
        Case("Produce v10, 16 KiB batch", produce(batch_of(16 * 1024)), KpProduceRequest, 10),
        Case("Produce v10, 1 MiB batch", produce(batch_of(1024 * 1024)), KpProduceRequest, 10),
        Case("Fetch req v16, 10 parts", fetch_req(1, 10), KpFetchRequest, 16),
        Case("Fetch req v16, 1000 parts", fetch_req(10, 100), KpFetchRequest, 16),
        Case("Fetch resp v16, 10x1 KiB", fetch_resp(1, 10, small), KpFetchResponse, 16),
        Case("Fetch resp v16, 1000x1 KiB", fetch_resp(10, 100, small), KpFetchResponse, 16),
        Case("Metadata resp v13, 100 parts", metadata(10, 10), KpMetadataResponse, 13),
    ]


def kio_encode(obj: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(obj))(out, obj)
    return out.getvalue()


def calibrated_loops(fn: Callable[[], object], min_time: float) -> int:
    """Calls per sample so that one sample runs at least `min_time`."""
    fn()  # warm up (and kio's per-type writer cache)
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - start >= min_time:
            return loops
        loops *= 2


def interleaved_fastest(fns: list[Callable[[], object]], reps: int, min_time: float) -> list[float]:
    """Seconds per call of each function in its fastest sample, the samples taken in turn (a, b,
    a, b, ...): load from elsewhere on this 2-core machine falls on all of them alike, and the
    fastest sample is the one it disturbed least (timeit's advice)."""
    loops = [calibrated_loops(fn, min_time) for fn in fns]
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, n, out in zip(fns, loops, samples, strict=True):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - start) / n)
    return [min(s) for s in samples]


def cross_check(case: Case) -> tuple[bytes, Any]:
    """The bytes both sides time, after checking each library reads the other's exactly."""
    wire = kio_encode(case.kio_obj)
    decoded, size = entity_reader(type(case.kio_obj))(wire, 0)
    assert size == len(wire) and decoded == case.kio_obj, case.name
    kp_obj = case.kp_class.decode(wire, version=case.version)
    assert bytes(kp_obj.encode()) == wire, f"{case.name}: kafka-python re-encodes differently"
    return wire, kp_obj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing loops")
    quick = parser.parse_args().quick
    reps, min_time = (3, 0.01) if quick else (9, 0.05)
    print(f"load average {os.getloadavg()[0]:.2f}; fastest of {reps} interleaved samples")
    print(
        f"{'message':30} {'bytes':>9} {'copy':>7} {'hdr':>5} | {'op':6} "
        f"{'kio µs':>9} {'x copy':>7} {'kio msg/s':>10} | {'kp µs':>9} {'x copy':>7} "
        f"{'kp msg/s':>10} | {'kp/kio':>6}"
    )
    for case in cases():
        wire, kp_obj = cross_check(case)
        reader = entity_reader(type(case.kio_obj))
        buffer = bytearray(wire)  # what a socket read gives; bytes(...) of it is one copy
        fns: list[Callable[[], object]] = [
            partial(bytes, buffer),
            partial(REQUEST_HEADER_FIXED.unpack_from, wire, 0),
            partial(reader, wire, 0),
            partial(case.kp_class.decode, wire, version=case.version),
            partial(kio_encode, case.kio_obj),
            kp_obj.encode,
        ]
        t_copy, t_hdr, *codec_times = interleaved_fastest(fns, reps, min_time)
        for i, op in enumerate(("decode", "encode")):
            t_kio, t_kp = codec_times[2 * i], codec_times[2 * i + 1]
            head = (
                f"{case.name:30} {len(wire):9,} {t_copy * 1e6:7.2f} {t_hdr * 1e6:5.2f}"
                if op == "decode"
                else " " * 55
            )
            print(
                f"{head} | {op:6} {t_kio * 1e6:9.2f} {t_kio / t_copy:7.1f} {1 / t_kio:10,.0f} | "
                f"{t_kp * 1e6:9.2f} {t_kp / t_copy:7.1f} {1 / t_kp:10,.0f} | {t_kp / t_kio:6.2f}"
            )
    print("copy = bytes() of the message (µs); hdr = struct.unpack_from of 8 header bytes (µs)")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
