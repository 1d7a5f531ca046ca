"""Test keys, a JWKS file and tokens for OAUTHBEARER (made with `cryptography` and PyJWT,
as an identity provider makes them)."""

from __future__ import annotations

import json
import time
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
