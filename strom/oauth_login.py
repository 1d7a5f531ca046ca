"""OAUTHBEARER tokens for clients configured by properties (the tools' --command-config,
the Spark connector's kafka.* options), as Kafka's OAuthBearerLoginCallbackHandler
(KIP-768) gets them from `sasl.oauthbearer.token.endpoint.url`:

    security.protocol=SASL_SSL
    sasl.mechanism=OAUTHBEARER
    sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.\
        OAuthBearerLoginCallbackHandler                         # optional here
    sasl.oauthbearer.token.endpoint.url=file:/var/run/secrets/tokens/strom
    # or the identity provider's token endpoint, with the OAuth client credentials grant:
    sasl.oauthbearer.token.endpoint.url=https://issuer.example/oauth2/token
    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
        required clientId="strom-tools" clientSecret="..." scope="strom";

- `file:`: the file holds the JWT (a Kubernetes projected service-account token, say); it
  is read at every authentication, so a rotated file is picked up.
- `http(s):`: an RFC 6749 §4.4 client-credentials request (HTTP Basic with the
  URL-encoded client id and secret, as Kafka sends it), at every authentication, within
  TOKEN_TIMEOUT_S; the answer's `access_token` is the token.

Both are kafka-python token providers (an object with token()), picklable, so Spark ships
them to its executors. The clients call token() off their event loop (strom_api/
sasl_client.py), and the blocking clients call it from their own thread.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

TOKEN_TIMEOUT_S = 10.0
MAX_TOKEN_BYTES = 1 << 20


class TokenUnavailable(Exception):
    """The token could not be had; the message says why (never the secret)."""


@dataclass(frozen=True)
class FileTokenProvider:
    path: str

    def token(self) -> str:
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise TokenUnavailable(
                f"cannot read the token file {self.path}: {exc.strerror}"
            ) from None
        if len(data) > MAX_TOKEN_BYTES:
            raise TokenUnavailable(f"the token file {self.path} is larger than 1 MiB")
        return data.decode("ascii", "replace").strip()


@dataclass(frozen=True)
class ClientCredentialsTokenProvider:
    url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""

    def token(self) -> str:
        body = {"grant_type": "client_credentials"}
        if self.scope:
            body["scope"] = self.scope
        basic = f"{urllib.parse.quote(self.client_id)}:{urllib.parse.quote(self.client_secret)}"
        request = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode(body).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(basic.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=TOKEN_TIMEOUT_S) as response:
                data = response.read(MAX_TOKEN_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise TokenUnavailable(
                f"the token endpoint {self.url} answered HTTP {exc.code} {exc.reason}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TokenUnavailable(
                f"cannot reach the token endpoint {self.url}: {reason}"
            ) from None
        try:
            token = json.loads(data)["access_token"]
            if not isinstance(token, str) or len(data) > MAX_TOKEN_BYTES:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise TokenUnavailable(
                f"the token endpoint {self.url} did not answer a JSON object with an access_token"
            ) from None
        return token
