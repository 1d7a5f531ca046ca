"""SecurityService.SaslAuthenticate streams that a client without credentials might send:
SCRAM client-first and client-final messages and PLAIN messages, well-formed and mutated,
mechanisms the listener does not serve, frames of absurd size, and messages in the wrong
order (a client-final first, a mechanism in the second message, more messages than the
exchange has, none at all).

None of them carries a password the node knows, so no answer may carry a session token
(run.py checks that). The whole stream is sent before the first answer is read (the
fuzzer's calls are not interactive), so a client-final never holds the server's nonce: the
exchanges end refused at the latest in their second step, as a forged proof does.
"""

from __future__ import annotations

import base64
import random

from strom_api.v1 import security_pb2
from tests.fuzz.messages import mutate_bytes

USER = "fuzz"  # the SCRAM user of the secured cluster (tests/fuzz/secured.py)
MECHANISMS = (
    "SCRAM-SHA-512",
    "SCRAM-SHA-256",
    "PLAIN",
    "scram-sha-512",
    "",
    "GSSAPI",
    "OAUTHBEARER",
    "SCRAM-SHA-1",
    "PLAIN\x00",
)
# Just past sasl.server.max.receive.size (524,288), and near gRPC's 4 MiB message limit.
ABSURD_SIZES = (8193, 524_289, 4 * 1024 * 1024 - 128 * 1024)


def _name(rng: random.Random) -> str:
    return rng.choice(
        (USER, "admin", "broker", "", "=2C", "a=3Db", "=ZZ", "x,y", "\u00e9\u2603", "a" * 300)
    )


def _nonce(rng: random.Random) -> str:
    return rng.choice(("", "abc", "a,b", base64.b64encode(rng.randbytes(24)).decode()))


def client_first(rng: random.Random) -> bytes:
    gs2 = rng.choice(("n,,", "y,,", "p=tls-unique,,", "n,a=admin,", f"n,a={USER},", "x,,", ""))
    parts = [f"n={_name(rng)}", f"r={_nonce(rng)}"]
    roll = rng.random()
    if roll < 0.15:
        parts.append("tokenauth=true")
    elif roll < 0.25:
        parts.insert(0, "m=mandatory")
    elif roll < 0.35:
        parts.reverse()
    elif roll < 0.45:
        parts.pop(rng.randrange(len(parts)))
    return (gs2 + ",".join(parts)).encode()


def client_final(rng: random.Random) -> bytes:
    channel = base64.b64encode(rng.choice((b"n,,", b"y,,", b"p=x,,", b""))).decode()
    proof = base64.b64encode(rng.randbytes(rng.choice((0, 32, 64, 65)))).decode()
    parts = [f"c={channel}", f"r={_nonce(rng)}", f"p={proof}"]
    roll = rng.random()
    if roll < 0.2:
        parts[2] = "p=not base64!"
    elif roll < 0.35:
        parts.pop(rng.randrange(len(parts)))
    elif roll < 0.45:
        parts.insert(2, "ext=1")
    return ",".join(parts).encode()


def plain(rng: random.Random) -> bytes:
    authzid = rng.choice(("", "", USER, "admin"))
    fields = [authzid, _name(rng), rng.choice(("wrong", "", "p" * 300, "\u2603"))]
    roll = rng.random()
    if roll < 0.15:
        return "\x00".join(fields[1:]).encode()  # one NUL short
    if roll < 0.25:
        return "\x00".join([*fields, "extra"]).encode()
    if roll < 0.3:
        return b"\xff\xfe\x00" + fields[1].encode() + b"\x00\x80"  # not UTF-8
    return "\x00".join(fields).encode()


def _auth_bytes(rng: random.Random, mechanism: str, step: int) -> bytes:
    roll = rng.random()
    if roll < 0.06:
        return rng.randbytes(rng.choice(ABSURD_SIZES))
    if roll < 0.12:
        return rng.randbytes(rng.randint(0, 64))
    if mechanism.upper().startswith("PLAIN"):
        data = plain(rng)
    else:
        data = client_first(rng) if step == 0 else client_final(rng)
    if roll < 0.3:
        data = mutate_bytes(rng, data)
    return data


def sasl_stream(rng: random.Random) -> list[bytes]:
    """One SaslAuthenticate client stream (0 to 4 messages), serialized."""
    mechanism = rng.choice(MECHANISMS)
    roll = rng.random()
    if roll < 0.05:
        return []  # half-closed at once
    if roll < 0.15:
        # Out of order: a client-final first.
        first = security_pb2.SaslAuthenticateRequest(
            mechanism=mechanism, auth_bytes=client_final(rng)
        )
        return [first.SerializeToString()]
    count = rng.choice((1, 1, 2, 2, 2, 3, 4))
    requests = []
    for step in range(count):
        request = security_pb2.SaslAuthenticateRequest(auth_bytes=_auth_bytes(rng, mechanism, step))
        # The mechanism belongs in the first message; sometimes in a later one too, or only
        # there (a wrong order), sometimes absurdly long.
        if step == 0 and rng.random() < 0.9 or step > 0 and rng.random() < 0.15:
            request.mechanism = mechanism if rng.random() < 0.95 else "M" * 40_000
        requests.append(request.SerializeToString())
    return requests
