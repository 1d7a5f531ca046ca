"""SCRAM credentials as RFC 5802 defines them and Kafka stores them
(`UserScramCredentialRecord`: salt, stored key, server key, iterations): never the password.

    SaltedPassword = Hi(password, salt, i)          (PBKDF2 with HMAC-H)
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Shared by the clients (`strom configs --alter --add-config 'SCRAM-SHA-512=[...]'` sends the
salted password, as Kafka's AlterUserScramCredentials does), `strom storage format
--add-scram`, the controller (which keeps stored and server keys) and the brokers'
SCRAM exchange.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

# Kafka's ScramMechanism: the name, its hash, and the iteration bounds Kafka enforces.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism.type()
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(
            f"unsupported SCRAM mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}"
        ) from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Client Key", hash_name(mechanism))


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Server Key", hash_name(mechanism))


def stored_key(mechanism: str, key: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), key).digest()


def credential_from_salted(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """What the controller keeps, from what AlterUserScramCredentials carries."""
    return ScramCredential(
        mechanism,
        salt,
        stored_key(mechanism, client_key(mechanism, salted)),
        server_key(mechanism, salted),
        iterations,
    )


def new_credential(
    mechanism: str,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for `password` with a fresh random salt (or `salt`)."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


def check_iterations(mechanism: str, iterations: int) -> None:
    """Kafka's bounds (ScramMechanism.minIterations/maxIterations): ValueError outside."""
    hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"Iterations {iterations} is out of range for {mechanism}: it must be between "
            f"{MIN_ITERATIONS} and {MAX_ITERATIONS}"
        )
