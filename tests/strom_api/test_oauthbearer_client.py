"""The client side of OAUTHBEARER without a node: kafka-python's sasl_oauth_token_provider
checked where the clients take it, the provider asked at each authentication, its failure
a SASL_AUTHENTICATION_FAILED, and properties files (the tools' --command-config, Spark's
kafka.*) told plainly that they cannot supply a token."""

from __future__ import annotations

import grpc
import pytest

from strom.command_config import settings_from_properties
from strom.errors import StromError
from strom.security import client_security
from strom_api.sasl_client import SaslLogin, _Exchange
from strom_api.tls import SaslSecurity


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


def test_properties_cannot_supply_a_token_and_say_what_can():
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}
    with pytest.raises(StromError) as refused:
        settings_from_properties(props, "--command-config client.properties")
    assert refused.value.name == "INVALID_CONFIG"
    message = refused.value.message
    assert message.startswith("sasl.mechanism=OAUTHBEARER in --command-config client.properties")
    assert "sasl_oauth_token_provider" in message and "SCRAM-SHA-512" in message
