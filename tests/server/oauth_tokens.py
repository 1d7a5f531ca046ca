"""Test keys, a JWKS file and tokens for OAUTHBEARER (made with `cryptography` and PyJWT,
as an identity provider makes them)."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://issuer.example"
AUDIENCE = "strom"


class Keys:
    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self, *extra: tuple[str, Any]) -> dict[str, Any]:
        entries = [("rsa-1", self.rsa.public_key()), ("ec-1", self.ec.public_key()), *extra]
        keys = []
        for kid, public in entries:
            algorithm = jwt.algorithms.RSAAlgorithm if kid.startswith("rsa") else None
            jwk = (algorithm or jwt.algorithms.ECAlgorithm).to_jwk(public, as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": keys}

    def write(self, path: Path, *extra: tuple[str, Any]) -> str:
        path.write_text(json.dumps(self.jwks(*extra)))
        return f"file:{path}"

    def token(
        self,
        sub: str = "alice",
        lifetime_s: float = 300,
        kid: str = "rsa-1",
        algorithm: str = "RS256",
        key: Any = None,
        **claims: Any,
    ) -> str:
        now = time.time()
        payload = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now)}
        payload["exp"] = int(now + lifetime_s)
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        signer = key if key is not None else (self.ec if algorithm.startswith("ES") else self.rsa)
        return jwt.encode(payload, signer, algorithm=algorithm, headers={"kid": kid})


class TokenEndpoint:
    """An OAuth token endpoint on loopback (RFC 6749 §4.4, client credentials): a POST with
    HTTP Basic client_id:secret answers {"access_token": <a JWT for sub=client_id>}."""

    def __init__(self, keys: Keys, clients: dict[str, str]) -> None:
        self.keys, self.clients = keys, clients
        self.requests: list[dict[str, str]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                form = dict(urllib.parse.parse_qsl(body.decode()))
                endpoint.requests.append(form)
                scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
                user, _, secret = base64.b64decode(encoded or "").decode().partition(":")
                user, secret = urllib.parse.unquote(user), urllib.parse.unquote(secret)
                if scheme != "Basic" or endpoint.clients.get(user) != secret:
                    self.send_response(401, "Unauthorized")
                    self.end_headers()
                    return
                answer = {"access_token": endpoint.keys.token(user), "token_type": "Bearer"}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TokenEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
