"""The codec library chosen for the Kafka wire-protocol listener (issue 20): kio.

README "Kafka protocol listener: codec choice" and docs/kafka_protocol.md say why kio. This
checks what the listener will rely on before the listener exists:
- a request header v2 and an ApiVersions v3 request encode to the bytes Kafka's protocol guide
  lays out (written here by hand) and decode back, the header's client_id in the legacy
  (non-compact) string form that Kafka keeps even in flexible headers;
- a Produce request's records stay the producer's RecordBatch bytes, untouched: the decoded
  field is those exact bytes, and strom_api.record_batch validates them batch by batch, as the
  broker's per-batch append path will (the oldest version Kafka 4 accepts, v3, a flexible
  one, v9, and librdkafka's, v10);
- a truncated request raises kio's DecodeError wherever the cut falls, records included (where
  kafka-python's `kafka.protocol` returns shortened records without complaint), and the
  decoder reports how many bytes it read, so a frame with bytes left over can be refused.
"""

from __future__ import annotations

import datetime
import importlib
import io
import struct
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.primitive import Records, i16, i32

from strom_api.record_batch import iter_batches
from strom_api.records import Record, encode_batch

API_VERSIONS = 18
PRODUCE = 0


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def compact_string(text: str) -> bytes:
    """Kafka's COMPACT_STRING: unsigned varint length + 1, then UTF-8 (short strings: 1 byte)."""
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def test_api_versions_request_encodes_as_the_protocol_guide_lays_it_out() -> None:
    header = RequestHeader(
        request_api_key=i16(API_VERSIONS),
        request_api_version=i16(3),
        correlation_id=i32(7),
        client_id="rdkafka",
    )
    body = ApiVersionsRequest(client_software_name="strom-test", client_software_version="1.0")
    no_tagged_fields = b"\x00"
    expected_header = struct.pack(">hhih", API_VERSIONS, 3, 7, 7) + b"rdkafka" + no_tagged_fields
    expected_body = compact_string("strom-test") + compact_string("1.0") + no_tagged_fields

    wire = encode(header) + encode(body)

    assert wire == expected_header + expected_body
    decoded_header, header_size = entity_reader(RequestHeader)(wire, 0)
    decoded_body, body_size = entity_reader(ApiVersionsRequest)(wire[header_size:], 0)
    assert (decoded_header, decoded_body) == (header, body)
    assert header_size + body_size == len(wire)


def idempotent_batches() -> bytes:
    """Two batches of one producer, as a producer sends a partition's records."""
    first = encode_batch(
        [Record(i, 1_700_000_000_000 + i, b"key-%d" % i, b"value" * 20) for i in range(5)],
        producer_id=4000,
        producer_epoch=0,
        base_sequence=0,
    )
    second = encode_batch(
        [Record(i, 1_700_000_000_100 + i, None, b"v" * 300) for i in range(3)],
        producer_id=4000,
        producer_epoch=0,
        base_sequence=5,
    )
    return first + second


def produce_request(version: int, records: bytes) -> Any:
    request_type = load_request_schema(PRODUCE, version)
    module = importlib.import_module(request_type.__module__)  # the version's nested types
    return request_type(
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            module.TopicProduceData(
                name=TopicName("orders"),
                partition_data=(
                    module.PartitionProduceData(index=i32(2), records=Records(records)),
                ),
            ),
        ),
    )


@pytest.mark.parametrize("version", [3, 9, 10])
def test_produce_records_stay_the_producers_batch_bytes(version: int) -> None:
    records = idempotent_batches()
    request = produce_request(version, records)
    wire = encode(request)

    decoded, size = entity_reader(type(request))(wire, 0)

    assert size == len(wire)
    assert decoded == request
    (topic,) = decoded.topic_data
    (partition,) = topic.partition_data
    assert (topic.name, partition.index) == ("orders", 2)
    assert isinstance(partition.records, bytes)
    assert partition.records == records
    headers = [header for _, header in iter_batches(partition.records)]
    assert [(h.producer_id, h.base_sequence, h.record_count) for h in headers] == [
        (4000, 0, 5),
        (4000, 5, 3),
    ]


@pytest.mark.parametrize("version", [3, 9])
def test_truncated_produce_request_is_a_decode_error(version: int) -> None:
    request = produce_request(version, idempotent_batches())
    wire = encode(request)
    read = entity_reader(type(request))
    # Inside the fixed fields, the topic name, the records' length and the records themselves;
    # in v3 the records are the message's last field, so only their declared length shows the
    # cut.
    for cut in (1, 8, 14, 20, len(wire) // 2, len(wire) - 1):
        with pytest.raises(DecodeError):
            read(wire[:cut], 0)


def test_decoder_reports_the_bytes_it_read_so_leftovers_show() -> None:
    body = ApiVersionsRequest(client_software_name="strom-test", client_software_version="1.0")
    wire = encode(body)

    _, size = entity_reader(ApiVersionsRequest)(wire + b"\x00\x01", 0)

    assert size == len(wire)
