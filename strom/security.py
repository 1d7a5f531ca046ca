"""The clients' security settings, with kafka-python's names (Producer, Consumer,
AdminClient and their strom.aio twins take them as keyword arguments):

    security_protocol="SSL"          # "PLAINTEXT" (default) or "SSL"
    ssl_cafile="ca.pem"              # CA certificates the brokers' are checked against
    ssl_certfile="client.pem"        # the client's certificate chain (mTLS); may hold the key
    ssl_keyfile="client.key"         # its private key, if not in ssl_certfile
    ssl_password="..."               # the key's password, if it is encrypted
    ssl_check_hostname=True          # the broker's host must be in its certificate's SANs

SASL_PLAINTEXT and SASL_SSL are refused (issue 18's next layer). A TLS handshake that fails
is an AuthenticationError at once ("SSL handshake failed: ..."), as Kafka's clients raise
SslAuthenticationException rather than retrying.
"""

from __future__ import annotations

from strom.errors import StromError
from strom_api.tls import ClientTls, TlsConfigError, client_tls

PROTOCOLS = ("PLAINTEXT", "SSL")


def client_security(
    security_protocol: str = "PLAINTEXT",
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: str | None = None,
    ssl_check_hostname: bool = True,
) -> ClientTls | None:
    """The TLS a client dials with, None for PLAINTEXT; INVALID_CONFIG for bad settings or
    PEM files."""
    protocol = str(security_protocol).upper()
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        raise StromError(
            "INVALID_CONFIG",
            f"security_protocol {protocol} is not supported yet: Strom's clients speak "
            "PLAINTEXT and SSL",
        )
    if protocol not in PROTOCOLS:
        raise StromError(
            "INVALID_CONFIG",
            f"security_protocol must be PLAINTEXT or SSL, not {security_protocol!r}",
        )
    if protocol == "PLAINTEXT":
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
                "INVALID_CONFIG",
                f"{', '.join(given)} given with security_protocol PLAINTEXT: set "
                "security_protocol='SSL' to use them",
            )
        return None
    try:
        return client_tls(ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password, ssl_check_hostname)
    except TlsConfigError as exc:
        raise StromError("INVALID_CONFIG", str(exc)) from None
