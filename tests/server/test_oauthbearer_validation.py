"""OAUTHBEARER without a node: the RFC 7628 initial response parsed strictly, tokens
validated as Kafka's OAuthBearerValidatorCallbackHandler validates them (against a JWKS
file of RSA and EC keys), and the listener's sasl.oauthbearer.* settings. Every refusal
names its cause and never echoes the token."""

from __future__ import annotations

import base64
import json
import os

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from server.listener_sasl import is_sasl_key, listener_sasl
from server.oauthbearer_validator import (
    OAuthBearerRefused,
    OAuthBearerSettings,
    OAuthBearerValidator,
)
from storage.errors import InvalidConfigError
from strom_api.oauthbearer import (
    OAuthBearerError,
    client_initial_response,
    parse_initial_response,
)
from tests.server.oauth_tokens import AUDIENCE, ISSUER, Keys


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


@pytest.fixture
def validator(keys, tmp_path) -> OAuthBearerValidator:
    url = keys.write(tmp_path / "jwks.json")
    return OAuthBearerValidator(OAuthBearerSettings(url, 30, (AUDIENCE, "kafka"), ISSUER))


def refusal(validator: OAuthBearerValidator, token: str) -> str:
    with pytest.raises(OAuthBearerRefused) as caught:
        validator.validate(token)
    message = str(caught.value)
    for part in (token, *token.split(".")):
        assert len(part) < 8 or part not in message, "the refusal echoes the token"
    return message


# --- the initial response --------------------------------------------------------------------


def test_initial_response_round_trips_as_kafka_writes_it(keys):
    token = keys.token()
    data = client_initial_response(token)
    assert data == f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    parsed = parse_initial_response(data)
    assert parsed.token == token and parsed.authorization_id == "" and parsed.extensions == {}
    assert token not in repr(parsed)


def test_initial_response_with_authzid_and_extensions():
    data = b"n,a=ali=2Cce,\x01auth=bearer a.b.c\x01traceId=42\x01\x01"
    parsed = parse_initial_response(data)
    assert (parsed.token, parsed.authorization_id) == ("a.b.c", "ali,ce")
    assert parsed.extensions == {"traceId": "42"}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "malformed"),
        (b"n,,\x01auth=Bearer a.b.c\x01", "malformed"),  # the final separator is missing
        (b"y,,\x01auth=Bearer a.b.c\x01\x01", "malformed"),  # channel binding flag
        (b"n,,\x01auth=Bearer a.b.c\x01\x01trailing", "malformed"),
        (b"n,,\x01auth=Bearer a.b\xff.c\x01\x01", "not ASCII"),
        (b"n,,\x01host=x\x01\x01", "no auth=Bearer"),
        (b"n,,\x01auth=Basic YWxpY2U6eA\x01\x01", "not 'Bearer <token>'"),
        (b"n,,\x01auth=Bearer a.b.c d\x01\x01", "not 'Bearer <token>'"),
        (b"n,,\x01auth=Bearer a.b.c\x01auth=Bearer d.e.f\x01\x01", "repeats the key 'auth'"),
        (
            b"n,,\x01auth=Bearer a.b.c\x01"
            + b"".join(b"k%s=v\x01" % bytes([65 + i // 26, 65 + i % 26]) for i in range(40))
            + b"\x01",
            "more than 32",
        ),  # noqa: E501
        (b"n,,\x01auth=Bearer a.b.c\x01k3y=v\x01\x01", "malformed"),  # keys are letters only
    ],
)
def test_malformed_initial_responses_are_refused_with_a_sentence(data, says):
    with pytest.raises(OAuthBearerError, match=says.replace("(", r"\(")):
        parse_initial_response(data)


def test_initial_response_parsing_is_bounded_on_a_large_message():
    import time

    data = b"n,,\x01auth=Bearer " + b"a" * 500_000 + b"\x01" + b"x" * 10
    started = time.monotonic()
    with pytest.raises(OAuthBearerError):
        parse_initial_response(data)
    assert time.monotonic() - started < 1.0


# --- the token -------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["RS256", "RS512", "PS256", "ES256"])
def test_valid_tokens_name_their_subject(keys, validator, algorithm):
    kid = "ec-1" if algorithm.startswith("ES") else "rsa-1"
    token = keys.token("alice", kid=kid, algorithm=algorithm)
    checked = validator.validate(token)
    assert checked.principal == "alice"
    assert checked.expires_at_s == jwt.decode(token, options={"verify_signature": False})["exp"]


def test_any_expected_audience_is_enough(keys, validator):
    assert validator.validate(keys.token(aud=["other", "kafka"])).principal == "alice"


def test_expired_token(keys, validator):
    assert "expired" in refusal(validator, keys.token(lifetime_s=-60))
    # within the clock skew (30 s) an expired token still passes, as in Kafka
    assert validator.validate(keys.token(lifetime_s=-10)).principal == "alice"


def test_token_not_valid_yet(keys, validator):
    import time

    assert "not valid yet" in refusal(validator, keys.token(nbf=int(time.time()) + 120))
    assert "not valid yet" in refusal(validator, keys.token(iat=int(time.time()) + 120))


def test_exp_is_required(keys, validator):
    token = jwt.encode(
        {"sub": "alice", "aud": AUDIENCE, "iss": ISSUER}, keys.rsa, "RS256", {"kid": "rsa-1"}
    )
    assert "no 'exp' claim" in refusal(validator, token)


def test_wrong_audience_and_issuer(keys, validator):
    assert "audience" in refusal(validator, keys.token(aud="someone-else"))
    assert "no 'aud' claim" in refusal(validator, keys.token(aud=None))
    assert "issuer" in refusal(validator, keys.token(iss="https://evil.example"))


def test_unknown_key_id_and_a_key_of_the_wrong_type(keys, validator):
    assert "key id 'rsa-9'" in refusal(validator, keys.token(kid="rsa-9"))
    # ES256 names an RSA key id: no EC key has it
    assert "not a ES256 key" in refusal(validator, keys.token(kid="rsa-1", algorithm="ES256"))


def test_signature_by_a_key_outside_the_jwks(keys, validator):
    token = keys.token(key=keys.other)  # says kid rsa-1, signed by another key
    assert refusal(validator, token) == "the token's signature does not verify"


def test_tampered_payload(keys, validator):
    header, payload, signature = keys.token("alice").split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert "signature does not verify" in refusal(validator, f"{header}.{forged}.{signature}")


def _unsigned(header: dict, claims: dict, signature: bytes = b"") -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return ".".join(
        [part(json.dumps(header).encode()), part(json.dumps(claims).encode()), part(signature)]
    )


def test_alg_none_is_refused(keys, validator):
    import time

    claims = {"sub": "admin", "aud": AUDIENCE, "iss": ISSUER, "exp": int(time.time()) + 300}
    token = _unsigned({"alg": "none", "kid": "rsa-1"}, claims)
    assert "algorithm 'none' is not accepted" in refusal(validator, token)


def test_hmac_signed_with_the_public_key_is_refused(keys, validator):
    """The algorithm confusion attack: HS256 keyed with the RSA public key's PEM, which a
    verifier trusting the token's alg would check with that same public key."""
    import hashlib
    import hmac
    import time

    pem = keys.rsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {"sub": "admin", "aud": AUDIENCE, "iss": ISSUER, "exp": int(time.time()) + 300}
    unsigned = _unsigned({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims)
    signing_input = unsigned.rsplit(".", 1)[0]
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    token = _unsigned({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims, mac)
    assert "algorithm 'HS256' is not accepted" in refusal(validator, token)


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "a.b", "....", "!!.e30.e30"])
def test_malformed_tokens(validator, token):
    assert refusal(validator, token) == "the token is not a well-formed JWT"


def test_a_header_without_alg(validator):
    assert "algorithm 'None' is not accepted" in refusal(validator, "e30.e30.e30")


def test_sub_claim_name_chooses_the_principal(keys, tmp_path):
    url = keys.write(tmp_path / "jwks.json")
    validator = OAuthBearerValidator(OAuthBearerSettings(url, sub_claim_name="client_id"))
    assert validator.validate(keys.token("alice", client_id="svc-orders")).principal == (
        "svc-orders"
    )
    assert "no 'client_id' claim" in refusal(validator, keys.token("alice"))


def test_the_jwks_file_is_read_again_when_it_changes(keys, tmp_path):
    path = tmp_path / "jwks.json"
    validator = OAuthBearerValidator(OAuthBearerSettings(keys.write(path)))
    rotated = keys.token(kid="rsa-2", key=keys.other)
    assert "key id 'rsa-2'" in refusal(validator, rotated)
    keys.write(path, ("rsa-2", keys.other.public_key()))
    os.utime(path, (0, 1_000_000))  # a different mtime even within the clock's resolution
    assert validator.validate(rotated).principal == "alice"
    assert validator.jwks.reloads == 1
    path.write_text("not json")  # a broken rewrite keeps the keys read before
    os.utime(path, (0, 2_000_000))
    assert validator.validate(rotated).principal == "alice"


# --- the listener's settings -----------------------------------------------------------------

BASE = {"listener.name.client.sasl.enabled.mechanisms": "OAUTHBEARER"}


def test_listener_enabling_oauthbearer_without_a_jwks_is_refused():
    with pytest.raises(InvalidConfigError, match="enables OAUTHBEARER without a JWKS"):
        listener_sasl(BASE, "CLIENT", None)


def test_listener_keys_win_over_global_ones(keys, tmp_path):
    url = keys.write(tmp_path / "jwks.json")
    props = {
        **BASE,
        "sasl.oauthbearer.jwks.endpoint.url": "file:/nonexistent/jwks.json",
        "listener.name.client.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
        "sasl.oauthbearer.expected.audience": "kafka, strom",
        "listener.name.client.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.expected.issuer": "https://global.example",
        "listener.name.client.sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.sub.claim.name": "azp",
        "listener.name.client.oauthbearer.sasl.server.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
        ),
        "listener.name.client.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
        ),
    }
    assert all(is_sasl_key(k) for k in props)
    validator = listener_sasl(props, "CLIENT", None).oauthbearer
    assert validator is not None
    assert validator.settings == OAuthBearerSettings(url, 5, ("kafka", "strom"), ISSUER, "azp")
    assert "expired" in refusal(validator, keys.token(lifetime_s=-10, azp="svc"))


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"sasl.oauthbearer.jwks.endpoint.url": "https://issuer.example/jwks"}, "not a file:"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:/nonexistent/jwks.json"}, "cannot read"),
        (
            {"listener.name.client.oauthbearer.sasl.server.callback.handler.class": "x.Y"},
            "OAuthBearerValidatorCallbackHandler only",
        ),
        ({"sasl.oauthbearer.clock.skew.seconds": "-1"}, "expected an int >= 0"),
        (
            {
                "listener.name.client.oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required ;"
                )
            },
            "OAUTHBEARER takes org.apache.kafka.common.security.oauthbearer",
        ),
    ],
)
def test_bad_oauthbearer_settings_are_refused_at_startup(keys, tmp_path, extra, says):
    props = {**BASE, "sasl.oauthbearer.jwks.endpoint.url": keys.write(tmp_path / "j.json")}
    with pytest.raises(InvalidConfigError, match=says):
        listener_sasl({**props, **extra}, "CLIENT", None)


def test_nodes_do_not_log_in_with_oauthbearer(keys, tmp_path):
    props = {**BASE, "sasl.oauthbearer.jwks.endpoint.url": keys.write(tmp_path / "j.json")}
    with pytest.raises(InvalidConfigError, match="nodes log in with"):
        listener_sasl(props, "CLIENT", "inter.broker")
