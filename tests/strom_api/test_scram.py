"""strom_api/scram.py: the RFC 7677 exchange byte for byte, round trips, and every way a
peer can get it wrong answered with ScramError (and nothing else)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom_api.scram import (
    AUTHZID_MISMATCH,
    MAX_MESSAGE_BYTES,
    ScramClient,
    ScramError,
    ScramServer,
    ScramStateError,
    escape_name,
    invalid_credentials,
)
from strom_api.scram_credential import ScramCredential, new_credential

# RFC 7677 §3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

SHA256 = "SCRAM-SHA-256"
SHA512 = "SCRAM-SHA-512"


def users(mechanism: str, **passwords: str) -> dict[str, ScramCredential]:
    return {name: new_credential(mechanism, pw) for name, pw in passwords.items()}


def server_for(mechanism: str, store: dict[str, ScramCredential], **kw) -> ScramServer:
    return ScramServer(mechanism, store.get, **kw)


def exchange(client: ScramClient, server: ScramServer) -> None:
    first = server.server_first(client.first_message())
    final = server.server_final(client.final_message(first))
    client.verify_server_final(final)


@pytest.fixture(scope="module")
def alice256() -> dict[str, ScramCredential]:
    return users(SHA256, alice="alice-secret")


def test_rfc7677_sha256_vector_byte_for_byte():
    credential = new_credential(SHA256, "pencil", 4096, salt=RFC_SALT)
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    server = ScramServer(SHA256, {"user": credential}.get, nonce=RFC_SERVER_NONCE)

    client_first = client.first_message()
    assert client_first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.server_first(client_first)
    assert server_first == f"r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    client_final = client.final_message(server_first)
    assert client_final == f"c=biws,r={RFC_NONCE},p={RFC_PROOF}".encode()
    server_final = server.server_final(client_final)
    assert server_final == f"v={RFC_SIGNATURE}".encode()
    client.verify_server_final(server_final)
    assert server.username == "user" and server.complete and client.complete


def test_sha512_round_trip_and_a_name_that_needs_escaping():
    store = users(SHA512, **{"bob": "s3cret"})
    store["a,b=c"] = new_credential(SHA512, "pässwörd", 8192)
    for name, password in [("bob", "s3cret"), ("a,b=c", "pässwörd")]:
        client = ScramClient(SHA512, name, password)
        server = server_for(SHA512, store)
        assert server.username is None
        exchange(client, server)
        assert server.username == name
    assert escape_name("a,b=c") == "a=2Cb=3Dc"


def test_wrong_password_fails_at_the_final_step_with_kafkas_sentence(alice256):
    client = ScramClient(SHA256, "alice", "wrong")
    server = server_for(SHA256, alice256)
    final = client.final_message(server.server_first(client.first_message()))
    with pytest.raises(ScramError) as raised:
        server.server_final(final)
    assert str(raised.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert server.username is None and not server.complete


def test_unknown_user_gets_a_stable_server_first_and_the_same_sentence(alice256):
    secret = b"per-server secret"
    answers = []
    for _ in range(2):
        client = ScramClient(SHA256, "mallory", "guess")
        server = server_for(SHA256, alice256, secret=secret)
        server_first = server.server_first(client.first_message())
        answers.append(server_first.decode().split(",")[1:])
        with pytest.raises(ScramError) as raised:
            server.server_final(client.final_message(server_first))
        assert str(raised.value) == invalid_credentials(SHA256)
        assert server.username is None
    # Same salt for the same name (no difference between two attempts), Kafka's default
    # iteration count, and a salt as long as a real one.
    assert answers[0] == answers[1]
    salt, iterations = answers[0]
    assert iterations == "i=4096" and len(base64.b64decode(salt[2:])) == 32
    # Without a secret given, still the same from one exchange to the next in a process.
    firsts = {
        server_for(SHA256, alice256).server_first(b"n,,n=mallory,r=abc").split(b",")[1]
        for _ in range(2)
    }
    assert len(firsts) == 1
    other = server_for(SHA256, alice256, secret=b"another server")
    other_first = other.server_first(ScramClient(SHA256, "mallory", "x").first_message())
    assert other_first.decode().split(",")[1] != answers[0][0]


def test_credential_of_another_mechanism_is_treated_as_unknown():
    store = users(SHA512, alice="alice-secret")
    client = ScramClient(SHA256, "alice", "alice-secret")
    server = server_for(SHA256, store)
    with pytest.raises(ScramError, match="invalid credentials"):
        server.server_final(client.final_message(server.server_first(client.first_message())))


def test_a_stored_credential_outside_the_iteration_bounds_is_no_credential():
    weak = new_credential(SHA256, "alice-secret", 4096)
    store = {"alice": ScramCredential(SHA256, weak.salt, weak.stored_key, weak.server_key, 1)}
    client = ScramClient(SHA256, "alice", "alice-secret")
    server = server_for(SHA256, store)
    server_first = server.server_first(client.first_message())
    assert server_first.endswith(b",i=4096") and base64.b64encode(weak.salt) not in server_first
    with pytest.raises(ScramError, match="invalid credentials"):
        server.server_final(client.final_message(server_first))


def test_tampered_nonce_is_refused(alice256):
    client = ScramClient(SHA256, "alice", "alice-secret")
    server = server_for(SHA256, alice256)
    final = client.final_message(server.server_first(client.first_message())).decode()
    nonce = final.split(",")[1]
    tampered = final.replace(nonce, nonce[:-1] + ("A" if nonce[-1] != "A" else "B"))
    with pytest.raises(ScramError, match="Invalid client nonce"):
        server.server_final(tampered.encode())
    with pytest.raises(ScramStateError):  # the failed exchange is over
        server.server_final(final.encode())


def test_replayed_client_final_fails_against_a_new_server(alice256):
    client = ScramClient(SHA256, "alice", "alice-secret", nonce="fixed-client-nonce")
    server = server_for(SHA256, alice256)
    client_first = client.first_message()
    final = client.final_message(server.server_first(client_first))
    server.server_final(final)
    assert server.username == "alice"
    # An eavesdropper replays both client messages: the new server's nonce differs.
    replay = server_for(SHA256, alice256)
    replay.server_first(client_first)
    with pytest.raises(ScramError, match="Invalid client nonce"):
        replay.server_final(final)
    assert replay.username is None


def test_tampered_proof_and_channel_binding_are_refused(alice256):
    for mutate, message in [
        (lambda f: f[: f.index(",p=") + 3] + base64.b64encode(b"\x00" * 32).decode(), "invalid"),
        (lambda f: f[: f.index(",p=") + 3] + base64.b64encode(b"\x00" * 5).decode(), "invalid"),
        (lambda f: f.replace("c=biws", "c=eSws"), "channel binding"),
        (lambda f: f.replace("c=biws", "c=cD10bHMtdW5pcXVlLCw="), "channel binding"),
        (lambda f: f.replace("c=biws", "c=bi*s"), "not base64"),
    ]:
        client = ScramClient(SHA256, "alice", "alice-secret")
        server = server_for(SHA256, alice256)
        final = client.final_message(server.server_first(client.first_message())).decode()
        with pytest.raises(ScramError, match=message):
            server.server_final(mutate(final).encode())


@pytest.mark.parametrize(
    ("client_first", "message"),
    [
        (b"p=tls-unique,,n=alice,r=abc", "channel binding is not supported"),
        (b"x,,n=alice,r=abc", "gs2 header"),
        (b"n,a=bob,n=alice,r=abc", "authorization id that is different"),
        (b"n,x=alice,n=alice,r=abc", "expected a="),
        (b"n,,m=ext,n=alice,r=abc", "mandatory"),
        (b"n,,n=al=4Cice,r=abc", "malformed user name escape"),
        (b"n,,n=alice=,r=abc", "malformed user name escape"),
        (b"n,,n=,r=abc", "empty user name"),
        (b"n,,n=alice,r=a b", "nonce"),
        (b"n,,n=alice,r=", "nonce"),
        (b"n,,n=alice", "too few"),
        (b"n,,r=abc,n=alice", "expected n="),
        (b"n,,n=alice,r=abc,tokenauth=true", "delegation tokens"),
        (b"n,,n=alice,r=abc,1x=2", "malformed extension"),
        (b"n,,n=\xffalice,r=abc", "not UTF-8"),
    ],
)
def test_bad_client_first_messages(alice256, client_first, message):
    server = server_for(SHA256, alice256)
    with pytest.raises(ScramError, match=message):
        server.server_first(client_first)
    with pytest.raises(ScramStateError):
        server.server_first(b"n,,n=alice,r=abc")


def test_authzid_equal_to_the_user_and_unknown_extensions_are_accepted(alice256):
    server = server_for(SHA256, alice256)
    answer = server.server_first(b"y,a=alice,n=alice,r=abc,foo=bar,tokenauth=false")
    assert answer.startswith(b"r=abc")
    assert str(ScramError(AUTHZID_MISMATCH)).startswith("Authentication failed: Client")


def test_y_header_with_its_own_channel_binding_completes(alice256):
    """A client that sent y,, binds c= to y,, (biws is n,,)."""
    client = ScramClient(SHA256, "alice", "alice-secret")
    server = server_for(SHA256, alice256)
    client._gs2_header = "y,,"  # what a client able to bind sends to a server that is not
    final = server.server_final(client.final_message(server.server_first(client.first_message())))
    client.verify_server_final(final)
    assert server.username == "alice"


def test_steps_out_of_order_raise(alice256):
    server = server_for(SHA256, alice256)
    with pytest.raises(ScramStateError):
        server.server_final(b"c=biws,r=abc,p=AAAA")
    client = ScramClient(SHA256, "alice", "alice-secret")
    with pytest.raises(ScramStateError):
        client.final_message(b"r=x,s=AAAA,i=4096")
    with pytest.raises(ScramStateError):
        client.verify_server_final(b"v=AAAA")
    exchange(client, server)
    with pytest.raises(ScramStateError):
        server.server_first(b"n,,n=alice,r=abc")
    with pytest.raises(ScramStateError):
        client.first_message()


def test_oversized_messages_are_refused_on_both_sides(alice256):
    big = b"n,,n=alice,r=" + b"a" * MAX_MESSAGE_BYTES
    with pytest.raises(ScramError, match=f"more than the {MAX_MESSAGE_BYTES} allowed"):
        server_for(SHA256, alice256).server_first(big)
    server = server_for(SHA256, alice256)
    server.server_first(b"n,,n=alice,r=abc")
    with pytest.raises(ScramError, match="allowed"):
        server.server_final(b"c=biws,r=" + b"a" * MAX_MESSAGE_BYTES + b",p=AAAA")
    client = ScramClient(SHA256, "alice", "x", nonce="abc")
    client.first_message()
    with pytest.raises(ScramError, match="allowed"):
        client.final_message(b"r=abc" + b"d" * MAX_MESSAGE_BYTES + b",s=AAAA,i=4096")


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        (b"r=abcdef,s=QUJD,i=4095", "Requested iterations 4095"),
        (b"r=abcdef,s=QUJD,i=999999999", "Requested iterations 999999999"),
        (b"r=abcdef,s=QUJD,i=99999999999999999999", "invalid iterations"),
        (b"r=abcdef,s=QUJD,i=-4096", "invalid iterations"),
        (b"r=xyzdef,s=QUJD,i=4096", "does not start with client nonce"),
        (b"r=abc,s=QUJD,i=4096", "does not start with client nonce"),
        (b"r=abcdef,s=,i=4096", "empty salt"),
        (b"r=abcdef,s=QU*D,i=4096", "not base64"),
        (b"m=x,r=abcdef,s=QUJD,i=4096", "mandatory"),
    ],
)
def test_client_refuses_a_bad_server_first(server_first, message):
    client = ScramClient(SHA256, "alice", "x", nonce="abc")
    client.first_message()
    with pytest.raises(ScramError, match=message):
        client.final_message(server_first)


def test_client_refuses_a_forged_or_failing_server_final(alice256):
    client = ScramClient(SHA256, "alice", "alice-secret")
    server = server_for(SHA256, alice256)
    client.final_message(server.server_first(client.first_message()))
    with pytest.raises(ScramError, match="Invalid server signature"):
        client.verify_server_final(b"v=" + base64.b64encode(b"\x01" * 32))
    assert not client.complete
    other = ScramClient(SHA256, "alice", "alice-secret")
    other.final_message(server_for(SHA256, alice256).server_first(other.first_message()))
    with pytest.raises(ScramError, match="failed with error: invalid-proof"):
        other.verify_server_final(b"e=invalid-proof")


# --- fuzz: arbitrary bytes at each server step only ever raise ScramError ---------------


def _valid_final(store: dict[str, ScramCredential]) -> tuple[ScramServer, bytes]:
    client = ScramClient(SHA256, "alice", "alice-secret", nonce="cn")
    server = ScramServer(SHA256, store.get, nonce="sn", secret=b"s")
    return server, client.final_message(server.server_first(client.first_message()))


FUZZ_STORE = users(SHA256, alice="alice-secret")
_, VALID_FINAL = _valid_final(FUZZ_STORE)
VALID_FIRST = b"n,,n=alice,r=cn,tokenauth=false"


def _mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, and the valid message with a slice replaced (deeper paths)."""
    spliced = st.tuples(
        st.integers(0, len(valid)), st.integers(0, len(valid)), st.binary(max_size=12)
    ).map(lambda t: valid[: min(t[:2])] + t[2] + valid[max(t[:2]) :])
    texts = st.text(alphabet=st.sampled_from(list("nyrcpsiav=,2C3D+/ab")), max_size=40).map(
        str.encode
    )
    return st.one_of(st.binary(max_size=300), spliced, texts)


@settings(max_examples=400, deadline=None)
@given(_mutations(VALID_FIRST))
def test_fuzz_server_first_raises_only_scram_error(data):
    server = ScramServer(SHA256, FUZZ_STORE.get, secret=b"s")
    try:
        server.server_first(data)
    except ScramError:
        assert server.username is None


@settings(max_examples=400, deadline=None)
@given(_mutations(VALID_FINAL))
def test_fuzz_server_final_raises_only_scram_error(data):
    server, _ = _valid_final(FUZZ_STORE)
    try:
        server.server_final(data)
    except ScramError:
        assert server.username is None
    else:
        assert data == VALID_FINAL and server.username == "alice"


@settings(max_examples=300, deadline=None)
@given(_mutations(b"r=cnsn,s=QUJD,i=4096"), _mutations(b"v=AAAA"))
def test_fuzz_client_steps_raise_only_scram_error(server_first, server_final):
    client = ScramClient(SHA256, "alice", "alice-secret", nonce="cn")
    client.first_message()
    try:
        client.final_message(server_first)
        client.verify_server_final(server_final)
    except ScramError:
        assert not client.complete
