"""strom_api/sasl_plain.py: Kafka's PlainSaslServer answers, RFC 4616 bounds, and
arbitrary bytes answered with PlainError only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom_api.sasl_plain import (
    MAX_FIELD_BYTES,
    MAX_MESSAGE_BYTES,
    PlainError,
    PlainServer,
    plain_message,
    users_check,
)

USERS = {"alice": "alice-secret", "bøb": "pä55"}


@pytest.fixture
def server() -> PlainServer:
    return PlainServer(users_check(USERS))


def test_valid_users_authenticate(server):
    assert server.authenticate(plain_message("alice", "alice-secret")) == "alice"
    assert server.authenticate(plain_message("bøb", "pä55")) == "bøb"
    assert server.authenticate(plain_message("alice", "alice-secret", authzid="alice")) == ("alice")
    assert plain_message("u", "p", "a") == b"a\x00u\x00p"


@pytest.mark.parametrize(
    ("username", "password"), [("alice", "wrong"), ("mallory", "alice-secret"), ("alice", "a")]
)
def test_wrong_password_and_unknown_user_get_the_same_sentence(server, username, password):
    with pytest.raises(PlainError) as raised:
        server.authenticate(plain_message(username, password))
    assert str(raised.value) == "Authentication failed: Invalid username or password"


def test_authzid_other_than_the_user_is_refused_after_the_password(server):
    with pytest.raises(PlainError) as raised:
        server.authenticate(plain_message("alice", "alice-secret", authzid="admin"))
    assert str(raised.value) == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )
    # Without the password the client learns nothing about the authzid rule.
    with pytest.raises(PlainError, match="Invalid username or password"):
        server.authenticate(plain_message("alice", "nope", authzid="admin"))


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        (b"alice\x00alice-secret", "expected 3 tokens, got 2"),
        (b"\x00alice\x00alice-secret\x00more", "expected 3 tokens, got 4"),
        (b"", "expected 3 tokens, got 1"),
        (b"\x00\x00alice-secret", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"\x00al\xffice\x00x", "not UTF-8"),
        (b"\x00" + b"a" * (MAX_FIELD_BYTES + 1) + b"\x00x", "username longer than 255"),
        (b"\x00alice\x00" + b"p" * (MAX_FIELD_BYTES + 1), "password longer than 255"),
        (b"a" * (MAX_FIELD_BYTES + 1) + b"\x00alice\x00x", "authorization id longer"),
        (b"\x00" * 3 + b"x" * MAX_MESSAGE_BYTES, "more than the 767 allowed"),
    ],
)
def test_malformed_messages(server, message, sentence):
    with pytest.raises(PlainError, match=sentence):
        server.authenticate(message)


def test_fields_of_exactly_255_bytes_are_accepted():
    name, password = "n" * MAX_FIELD_BYTES, "é" * (MAX_FIELD_BYTES // 2)
    server = PlainServer(users_check({name: password}))
    assert server.authenticate(plain_message(name, password, authzid=name)) == name


def test_the_check_is_called_with_the_decoded_fields():
    seen = []
    server = PlainServer(lambda u, p: seen.append((u, p)) or True)
    assert server.authenticate(b"\x00us,er\x00pass word") == "us,er"
    assert seen == [("us,er", "pass word")]


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=800),
        st.lists(st.binary(max_size=300), min_size=1, max_size=5).map(b"\x00".join),
    )
)
def test_fuzz_arbitrary_bytes_raise_only_plain_error(data):
    server = PlainServer(users_check(USERS))
    try:
        assert server.authenticate(data) in USERS
    except PlainError:
        pass
