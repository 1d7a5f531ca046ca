"""The consumer's fetch session handler (strom/fetch_session.py, Kafka's
FetchSessionHandler) without I/O: what each fetch names, and how session errors and lost
answers turn the next fetch into a full one."""

from __future__ import annotations

from strom.fetch_session import FetchSessionHandler
from strom_api.error_codes import ErrorCode


def opened(handler: FetchSessionHandler[str], offsets: dict[str, int], session_id: int = 7):
    sent = handler.build(offsets)
    assert handler.handle_response(sent, session_id, None)
    return sent


def test_a_full_fetch_opens_the_session_then_only_changes_are_named():
    handler: FetchSessionHandler[str] = FetchSessionHandler()
    full = opened(handler, {"a": 0, "b": 0, "c": 5})
    assert (full.session_id, full.epoch, full.full) == (0, 0, True)
    assert full.named == {"a": 0, "b": 0, "c": 5}
    # a moved on, b stays, c unassigned, d added
    sent = handler.build({"a": 3, "b": 0, "d": 0})
    assert (sent.session_id, sent.epoch, sent.full) == (7, 1, False)
    assert sent.named == {"a": 3, "d": 0}
    assert sent.forgotten == ["c"]
    assert handler.handle_response(sent, 7, None)
    quiet = handler.build({"a": 3, "b": 0, "d": 0})
    assert (quiet.epoch, quiet.named, quiet.forgotten) == (2, {}, [])


def test_session_id_not_found_starts_over_without_the_id():
    handler: FetchSessionHandler[str] = FetchSessionHandler()
    opened(handler, {"a": 0})
    sent = handler.build({"a": 1})
    assert not handler.handle_response(sent, 0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    again = handler.build({"a": 1})
    assert (again.session_id, again.epoch, again.named) == (0, 0, {"a": 1})
    assert handler.stats.session_errors == 1


def test_a_wrong_epoch_or_a_lost_answer_closes_the_session_with_a_full_fetch():
    handler: FetchSessionHandler[str] = FetchSessionHandler()
    opened(handler, {"a": 0, "b": 0})
    sent = handler.build({"a": 1, "b": 0})
    assert not handler.handle_response(sent, 7, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    full = handler.build({"a": 1, "b": 0})
    # the old id is named with epoch 0, so the broker closes it
    assert (full.session_id, full.epoch, full.named) == (7, 0, {"a": 1, "b": 0})
    assert handler.handle_response(full, 9, None)
    handler.build({"a": 2, "b": 0})
    handler.handle_error()  # the stream broke before the answer came
    after = handler.build({"a": 2, "b": 0})
    assert (after.session_id, after.epoch, after.named) == (9, 0, {"a": 2, "b": 0})


def test_no_session_from_the_broker_keeps_fetching_in_full():
    handler: FetchSessionHandler[str] = FetchSessionHandler()
    opened(handler, {"a": 0}, session_id=0)  # no slot free
    sent = handler.build({"a": 0})
    assert (sent.session_id, sent.epoch, sent.named) == (0, 0, {"a": 0})
    # a session that an incremental fetch emptied was closed: answered with id 0
    opened(handler, {"a": 0}, session_id=4)
    emptied = handler.build({})
    assert emptied.forgotten == ["a"]
    assert handler.handle_response(emptied, 0, None)
    assert handler.build({"a": 0}).full
