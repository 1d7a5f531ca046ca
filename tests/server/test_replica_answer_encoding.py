"""The leader's ReplicaFetchResponse is written by joining each partition's records in after
its other fields (server/replica_service.encoded, strom_api/spliced.py) rather than by
protobuf: the bytes must be exactly what protobuf's SerializeToString writes, so every
follower reads the same message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.follower_fetch import FetchResponse, PartitionAnswer
from broker.replica_wire import response_of
from server.api_errors import make_error
from server.replica_service import Response, encoded
from strom_api.spliced import field_head, highest_field, uvarint

ERRORS = st.sampled_from([None, "OFFSET_OUT_OF_RANGE", "NOT_LEADER_OR_FOLLOWER"])
OFFSETS = st.integers(min_value=-1, max_value=2**62)
partitions = st.builds(
    PartitionAnswer,
    topic_id=st.binary(min_size=16, max_size=16),
    partition=st.integers(min_value=0, max_value=2**31 - 1),
    error=ERRORS,
    # up to 20 KB: a length needing a 3-byte varint, and empty (left out, as proto3 does)
    records=st.one_of(st.just(b""), st.binary(max_size=20_000)),
    high_watermark=OFFSETS,
    log_start_offset=OFFSETS,
    log_end_offset=OFFSETS,
    diverging=st.one_of(st.none(), st.tuples(st.integers(0, 2**31 - 1), OFFSETS)),
    message=st.text(max_size=40),
)
answers = st.one_of(
    st.builds(
        FetchResponse,
        partitions=st.lists(partitions, max_size=4).map(tuple),
        session_id=st.integers(min_value=0, max_value=2**31 - 1),
    ),
    st.builds(
        FetchResponse,
        error=st.sampled_from(["STALE_BROKER_EPOCH", "FETCH_SESSION_ID_NOT_FOUND"]),
        message=st.text(max_size=40),
        session_id=st.integers(min_value=0, max_value=2**31 - 1),
    ),
)


def by_protobuf(answer: FetchResponse) -> bytes:
    """The same answer built as a message and serialized by protobuf: the oracle."""
    response = Response(session_id=answer.session_id)
    if answer.error is not None:
        response.error.CopyFrom(make_error(answer.error, answer.message))
        return response.SerializeToString()
    for part in answer.partitions:
        out = response.partitions.add(
            topic_id=part.topic_id,
            partition=part.partition,
            high_watermark=part.high_watermark,
            log_start_offset=part.log_start_offset,
            log_end_offset=part.log_end_offset,
            records=part.records,
        )
        if part.error is not None:
            out.error.CopyFrom(make_error(part.error, part.message))
        if part.diverging is not None:
            out.diverging_epoch.epoch, out.diverging_epoch.end_offset = part.diverging
    return response.SerializeToString()


@given(answers)
def test_the_joined_answer_is_byte_for_byte_protobufs(answer: FetchResponse) -> None:
    wire = encoded(answer)
    assert wire == by_protobuf(answer)
    read = response_of(Response.FromString(wire))
    if answer.error is None:
        assert [(p.records, p.high_watermark, p.diverging) for p in read.partitions] == [
            (p.records, p.high_watermark, p.diverging) for p in answer.partitions
        ]
    else:
        assert read.error == answer.error


def test_varints_and_field_heads_as_protobuf_writes_them() -> None:
    for value in (0, 1, 127, 128, 300, 16_383, 16_384, 2**31, 2**62):
        # high_watermark is field 4, a varint: key 0x20, then the value's varint
        written = Response.Partition(high_watermark=value).SerializeToString()
        assert written == (b"\x20" + uvarint(value) if value else b"")
    assert field_head(8, 300) == Response.Partition(records=b"x" * 300).SerializeToString()[:3]


def test_only_the_highest_numbered_field_may_be_joined_in() -> None:
    assert highest_field(Response.Partition.DESCRIPTOR, "records") == 8
    try:
        highest_field(Response.Partition.DESCRIPTOR, "topic_id")
    except ValueError as exc:
        assert "topic_id is not the highest-numbered field" in str(exc)
    else:
        raise AssertionError("topic_id accepted")
