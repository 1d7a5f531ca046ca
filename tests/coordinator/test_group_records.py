"""__consumer_offsets records in Kafka's layouts, and the group -> partition rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.group.records import (
    BATCH_HEADER_BYTES,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    java_string_hash,
    min_offset_record_bytes,
    offset_key,
    offset_value,
    partition_for_group,
)
from strom_api.records import Record, encode_batch


def test_java_string_hash_matches_java():
    # Values of java.lang.String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the famous MIN_VALUE one
    assert partition_for_group("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) = 0


def test_offset_commit_key_layout_is_kafkas():
    key = offset_key(OffsetKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_key(group_key(GroupKey("g"))) == GroupKey("g")


@given(st.integers(-1, 2**40), st.integers(-1, 2**20), st.text(max_size=20), st.integers(0, 2**45))
def test_offset_values_round_trip(offset, epoch, metadata, ts):
    value = OffsetValue(offset, epoch, metadata, ts)
    assert decode_offset_value(offset_value(value)) == value


def test_group_values_round_trip():
    member = MemberValue("m-1", "static-1", "client", "127.0.0.1", 300000, 45000, b"sub", b"asg")
    value = GroupValue("consumer", 7, "range", "m-1", 123, (member, member))
    assert decode_group_value(group_value(value)) == value
    empty = GroupValue("", 3, None, None, 0, ())
    assert decode_group_value(group_value(empty)) == empty


@given(
    st.text(max_size=30),
    st.text(max_size=30),
    st.lists(
        st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**62), st.text(max_size=5)),
        min_size=1,
    ),
    st.integers(0, 2**45),
)
def test_the_least_size_of_offset_commit_records_is_never_more_than_their_batch(
    group, topic, offsets, ts
):
    """commit_size_refusal refuses a commit whose least size is past max.message.bytes: that
    least size must never exceed the batch the coordinator would write (as
    broker/group_partitions.py encodes it), else a commit that fits would be refused."""
    records = [
        Record(
            i, ts, offset_key(OffsetKey(group, topic, p)), offset_value(OffsetValue(o, -1, m, ts))
        )
        for i, (p, o, m) in enumerate(offsets)
    ]
    least = BATCH_HEADER_BYTES + len(offsets) * min_offset_record_bytes(group, topic)
    assert least <= len(encode_batch(records))
