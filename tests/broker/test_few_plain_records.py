"""broker/produce_checks.few_plain_records: which produced batches a leader validates on its
event loop (uncompressed, at most so many records in all, judged from the batch headers
alone), and that anything it cannot judge goes to validation proper."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.produce_checks import few_plain_records
from strom_api import compression
from strom_api.records import Record, encode_batch

NOW = 1_700_000_000_000


def batch(count: int, codec: int = compression.NONE) -> bytes:
    records = [Record(i, NOW, None, b"v" * 100) for i in range(count)]
    return encode_batch(records, compression_codec=codec)


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8))
def test_uncompressed_batches_count_their_records_in_all(counts):
    request = b"".join(batch(n) for n in counts)
    total = sum(counts)
    assert few_plain_records(request, total)
    assert not few_plain_records(request, total - 1)


def test_a_compressed_batch_anywhere_goes_to_validation_off_the_loop():
    request = batch(3) + batch(3, compression.ZSTD) + batch(3)
    assert not few_plain_records(request, 1_000)


def test_bytes_it_cannot_judge_are_not_judged_small():
    whole = batch(3) + batch(4)
    assert not few_plain_records(whole[:-1], 1_000)  # the last batch runs past the end
    assert not few_plain_records(whole[:30], 1_000)  # not even a whole header
    bad_length = bytearray(batch(3))
    bad_length[8:12] = (0).to_bytes(4, "big")
    assert not few_plain_records(bytes(bad_length), 1_000)
    assert not few_plain_records(whole + b"\0" * 5, 1_000)  # trailing bytes


def test_a_batch_that_claims_no_records_still_counts_as_one():
    empty_claim = bytearray(batch(2))
    empty_claim[57:61] = (0).to_bytes(4, "big")
    assert few_plain_records(bytes(empty_claim), 1)
    assert not few_plain_records(bytes(empty_claim) * 2, 1)
