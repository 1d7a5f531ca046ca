"""The clients' security settings, with kafka-python's names (Producer, Consumer,
AdminClient and their strom.aio twins take them as keyword arguments):

    security_protocol="SASL_SSL"     # PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_cafile="ca.pem"              # CA certificates the brokers' are checked against
    ssl_certfile="client.pem"        # the client's certificate chain (mTLS); may hold the key
    ssl_keyfile="client.key"         # its private key, if not in ssl_certfile
    ssl_password="..."               # the key's password, if it is encrypted
    ssl_check_hostname=True          # the broker's host must be in its certificate's SANs
    sasl_mechanism="SCRAM-SHA-512"   # SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (kafka-python's
                                     # default) or OAUTHBEARER
    sasl_plain_username="alice"      # kafka-python's names, for SCRAM as for PLAIN
    sasl_plain_password="..."
    sasl_oauth_token_provider=p      # OAUTHBEARER: an object whose token() returns a JWT
                                     # (kafka-python's AbstractTokenProvider); called at
                                     # every (re-)authentication, so it can refresh

An OAUTHBEARER session ends when the token expires (or at connections.max.reauth.ms): the
client then asks the provider again, ahead of expiry, as Kafka's clients re-login.

A TLS handshake or SASL exchange that fails is an AuthenticationError at once ("SSL
handshake failed: ...", "SASL_AUTHENTICATION_FAILED: ..."), as Kafka's clients raise
SslAuthenticationException / SaslAuthenticationException rather than retrying.
"""

from __future__ import annotations

from typing import Any

from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_api.sasl_client import MECHANISM_NAMES, OAUTHBEARER, SaslLogin
from strom_api.tls import ChannelSecurity, SaslSecurity, TlsConfigError, client_tls

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def client_security(
    security_protocol: str = "PLAINTEXT",
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: str | None = None,
    ssl_check_hostname: bool = True,
    sasl_mechanism: str = "PLAIN",
    sasl_plain_username: str | None = None,
    sasl_plain_password: str | None = None,
    sasl_oauth_token_provider: Any = None,
) -> ChannelSecurity:
    """How a client dials: None for PLAINTEXT, a ClientTls for SSL, a SaslSecurity for
    SASL_*; INVALID_CONFIG for bad settings or PEM files."""
    protocol = str(security_protocol).upper()
    if protocol not in PROTOCOLS:
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"security_protocol must be one of {', '.join(PROTOCOLS)}, not {security_protocol!r}",
        )
    login = _sasl_login(
        protocol,
        sasl_mechanism,
        sasl_plain_username,
        sasl_plain_password,
        sasl_oauth_token_provider,
    )
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        given = [
            n
            for n, v in (
                ("ssl_cafile", ssl_cafile),
                ("ssl_certfile", ssl_certfile),
                ("ssl_keyfile", ssl_keyfile),
            )
            if v is not None
        ]
        if given:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"{', '.join(given)} given with security_protocol {protocol}: set "
                "security_protocol='SSL' or 'SASL_SSL' to use them",
            )
        return None if login is None else SaslSecurity(None, login)
    try:
        tls = client_tls(ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password, ssl_check_hostname)
    except TlsConfigError as exc:
        raise StromError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return tls if login is None else SaslSecurity(tls, login)


def _sasl_login(
    protocol: str,
    mechanism: str,
    username: str | None,
    password: str | None,
    token_provider: Any,
) -> SaslLogin | None:
    if not protocol.startswith("SASL_"):
        given = [
            n
            for n, v in (
                ("sasl_plain_username", username),
                ("sasl_plain_password", password),
                ("sasl_oauth_token_provider", token_provider),
            )
            if v
        ]
        if given:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                f"{', '.join(given)} given with security_protocol {protocol}: set "
                "security_protocol='SASL_SSL' or 'SASL_PLAINTEXT' to use them",
            )
        return None
    name = str(mechanism).upper()
    if name not in MECHANISM_NAMES:
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"sasl_mechanism must be one of {', '.join(MECHANISM_NAMES)}, not {mechanism!r}",
        )
    if name == OAUTHBEARER:
        if not callable(getattr(token_provider, "token", None)):
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider, an object whose "
                "token() method returns the JWT",
            )
        return SaslLogin(name, token_provider=token_provider)
    if token_provider is not None:
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"sasl_oauth_token_provider given with sasl_mechanism {name}: set "
            "sasl_mechanism='OAUTHBEARER' to use it",
        )
    if not username or password is None:
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"security_protocol {protocol} needs sasl_plain_username and sasl_plain_password "
            "(sasl.jaas.config, or sasl.username and sasl.password, in a properties file)",
        )
    return SaslLogin(name, username, password)
