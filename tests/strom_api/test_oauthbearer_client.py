"""The client side of OAUTHBEARER without a node: kafka-python's sasl_oauth_token_provider
checked where the clients take it, the provider asked at each authentication, its failure
a SASL_AUTHENTICATION_FAILED; and the tokens of properties files (the tools'
--command-config, Spark's kafka.*): a token file, or Kafka's client-credentials login
against a real token endpoint on loopback."""

from __future__ import annotations

import pickle

import grpc
import jwt
import pytest

from strom.client_properties import LOGIN_HANDLERS, settings_from_properties
from strom.errors import StromError
from strom.oauth_login import TokenUnavailable
from strom.security import client_security
from strom_api.sasl_client import SaslLogin, _Exchange
from strom_api.tls import SaslSecurity
from tests.server.oauth_tokens import Keys, TokenEndpoint


class Provider:
    def __init__(self, token: object = "eyJh.eyJz.c2ln") -> None:
        self.value = token
        self.calls = 0

    def token(self) -> object:
        self.calls += 1
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_the_provider_makes_an_oauthbearer_login():
    provider = Provider()
    security = client_security(
        "SASL_PLAINTEXT", sasl_mechanism="oauthbearer", sasl_oauth_token_provider=provider
    )
    assert isinstance(security, SaslSecurity)
    assert security.login == SaslLogin("OAUTHBEARER", token_provider=provider)


def test_each_authentication_asks_the_provider_for_its_token():
    provider = Provider()
    login = SaslLogin("OAUTHBEARER", token_provider=provider)
    assert _Exchange(login).first() == b"n,,\x01auth=Bearer eyJh.eyJz.c2ln\x01\x01"
    assert _Exchange(login).first() and provider.calls == 2
    assert _Exchange(login).next(0, b"") is None  # one message, then the session


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (RuntimeError("the identity provider is down"), "provider failed: the identity"),
        (b"bytes", "returned bytes, not the JWT as a str"),
        ("has spaces in it", "not a compact JWT"),
    ],
)
def test_a_failing_provider_is_an_authentication_failure(token, says):
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        _Exchange(SaslLogin("OAUTHBEARER", token_provider=Provider(token))).first()
    assert failed.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert failed.value.details().startswith("SASL_AUTHENTICATION_FAILED: ")
    assert says in failed.value.details()


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"sasl_mechanism": "OAUTHBEARER"}, "needs sasl_oauth_token_provider"),
        (
            {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": object()},
            "needs sasl_oauth_token_provider",
        ),
        (
            {"sasl_mechanism": "PLAIN", "sasl_oauth_token_provider": Provider()},
            "sasl_oauth_token_provider given with sasl_mechanism PLAIN",
        ),
        (
            {"security_protocol": "SSL", "sasl_oauth_token_provider": Provider()},
            "sasl_oauth_token_provider given with security_protocol SSL",
        ),
    ],
)
def test_bad_oauthbearer_settings_are_invalid_config(settings, says):
    with pytest.raises(StromError) as refused:
        client_security(**{"security_protocol": "SASL_SSL", **settings})
    assert refused.value.name == "INVALID_CONFIG"
    assert says in refused.value.message


# --- tokens for properties files (strom/oauth_login.py) --------------------------------------

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def oauth_props(url: str, jaas: str | None = None, **more: str) -> dict[str, str]:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": url,
        **more,
    }
    if jaas is not None:
        props["sasl.jaas.config"] = jaas
    return props


def provider_of(props: dict[str, str]) -> object:
    settings = settings_from_properties(props, "client.properties")
    assert settings["sasl_mechanism"] == "OAUTHBEARER"
    assert client_security(**settings) is not None  # the clients take it
    return settings["sasl_oauth_token_provider"]


def test_a_token_file_is_read_at_every_authentication(tmp_path):
    path = tmp_path / "token"
    path.write_text("first.token.jwt\n")
    provider = provider_of(oauth_props(f"file:{path}"))
    assert provider.token() == "first.token.jwt"  # type: ignore[attr-defined]
    path.write_text("second.token.jwt")  # rotated
    assert provider.token() == "second.token.jwt"  # type: ignore[attr-defined]
    path.unlink()
    with pytest.raises(TokenUnavailable, match="cannot read the token file"):
        provider.token()  # type: ignore[attr-defined]


def test_client_credentials_from_the_token_endpoint():
    keys = Keys()
    with TokenEndpoint(keys, {"strom tools": "s3cret:!"}) as endpoint:
        jaas = f'{MODULE} required clientId="strom tools" clientSecret="s3cret:!" scope="strom";'
        provider = provider_of(
            oauth_props(
                endpoint.url,
                jaas,
                **{"sasl.login.callback.handler.class": LOGIN_HANDLERS[0]},
            )
        )
        token = provider.token()  # type: ignore[attr-defined]
        assert jwt.decode(token, options={"verify_signature": False})["sub"] == "strom tools"
        assert endpoint.requests == [{"grant_type": "client_credentials", "scope": "strom"}]
        assert "s3cret" not in repr(provider)
        assert pickle.loads(pickle.dumps(provider)) == provider  # Spark ships it to executors
        wrong = f'{MODULE} required clientId="strom tools" clientSecret="nope";'
        with pytest.raises(TokenUnavailable, match="answered HTTP 401 Unauthorized"):
            provider_of(oauth_props(endpoint.url, wrong)).token()  # type: ignore[attr-defined]
    with pytest.raises(TokenUnavailable, match="cannot reach the token endpoint"):
        provider.token()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("props", "says"),
    [
        (oauth_props(""), "needs sasl.oauthbearer.token.endpoint.url"),
        (oauth_props("ftp://x/token"), "needs sasl.oauthbearer.token.endpoint.url"),
        (oauth_props("https://issuer.example/token"), "needs sasl.jaas.config="),
        (
            oauth_props("https://issuer.example/token", f'{MODULE} required clientId="a";'),
            "needs sasl.jaas.config=",
        ),
        (
            oauth_props("file:/t", **{"sasl.login.callback.handler.class": "x.Y"}),
            "sasl.login.callback.handler.class is x.Y",
        ),
    ],
)
def test_bad_oauthbearer_properties_are_one_sentence(props, says):
    with pytest.raises(StromError) as refused:
        settings_from_properties(props, "client.properties")
    assert refused.value.name == "INVALID_CONFIG"
    assert says in refused.value.message and "(client.properties)" in refused.value.message


def test_spark_options_take_the_same_token_settings(tmp_path):
    from pyspark_strom.options import client_tls_of, security_settings

    (tmp_path / "token").write_text("a.b.c")
    security = security_settings(
        {
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauthbearer.token.endpoint.url": f"file:{tmp_path / 'token'}",
        }
    )
    shipped = pickle.loads(pickle.dumps(security))  # as Spark sends it to an executor
    login = client_tls_of(shipped).login  # type: ignore[union-attr]
    assert login.mechanism == "OAUTHBEARER" and login.token_provider.token() == "a.b.c"
