"""`strom storage format --add-scram` text into UserScramCredentialRecords (Kafka's
ScramParser, kafka-storage.sh format --add-scram), with Kafka's error sentences.

    SCRAM-SHA-512=[name=admin,password=admin-secret]
    SCRAM-SHA-256=[name=alice,iterations=8192,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",
                   password=alice-secret]
    SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]

`salt` and `saltedpassword` are base64, a value may be wrapped in double quotes; without a
salt one is drawn at random, without iterations Kafka's 4096 are used. The password is
salted here (strom_api/scram_credential.py) and never written anywhere.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from metadata.image import scram_record
from storage.errors import InvalidConfigError
from strom_api.scram_credential import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
    new_credential,
)
from strom_api.v1 import metadata_pb2 as pb


def _split(component: str) -> tuple[str, str]:
    """Kafka's splitTrimmedConfigStringComponent: key=value, quotes around the value
    dropped."""
    key, equals, value = component.partition("=")
    if not equals:
        raise InvalidConfigError(f"No equals sign found in SCRAM component: {component}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidConfigError(
            f"The '{what}' value of add-scram is not base64: {value}"
        ) from None


def _iterations(value: str | None, mechanism: str) -> int:
    if value is None:
        return DEFAULT_ITERATIONS
    try:
        iterations = int(value)
    except ValueError:
        raise InvalidConfigError(
            f"The 'iterations' value of add-scram is not an integer: {value}"
        ) from None
    if iterations < MIN_ITERATIONS:
        raise InvalidConfigError(
            f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {mechanism}"
        )
    if iterations > MAX_ITERATIONS:
        raise InvalidConfigError(
            f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism}"
        )
    return iterations


def parse_one(text: str) -> pb.UserScramCredentialRecord:
    mechanism, value = _split(text)
    if mechanism not in MECHANISMS:
        raise InvalidConfigError(f"The add-scram mechanism {mechanism} is not supported.")
    if not value.startswith("["):
        raise InvalidConfigError("Expected configuration string to start with [")
    if not value.endswith("]"):
        raise InvalidConfigError("Expected configuration string to end with ]")
    args = dict(_split(c) for c in value[1:-1].split(","))
    name = args.pop("name", None)
    salt_text = args.pop("salt", None)
    salted_text = args.pop("saltedpassword", None)
    password = args.pop("password", None)
    iterations_text = args.pop("iterations", None)
    if args:
        raise InvalidConfigError("Unknown SCRAM configurations: " + ", ".join(sorted(args)))
    if not name:
        raise InvalidConfigError("You must supply 'name' to add-scram")
    iterations = _iterations(iterations_text, mechanism)
    salt = None if salt_text is None else _base64(salt_text, "salt")
    if salted_text is not None:
        if password is not None:
            raise InvalidConfigError(
                "You must only supply one of 'password' or 'saltedpassword' to add-scram"
            )
        if salt is None:
            raise InvalidConfigError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted = _base64(salted_text, "saltedpassword")
        credential = credential_from_salted(mechanism, salt, salted, iterations)
    elif password is None:
        raise InvalidConfigError(
            "You must supply one of 'password' or 'saltedpassword' to add-scram"
        )
    else:
        credential = new_credential(mechanism, password, iterations, salt)
    return scram_record(name, credential)


def parse(texts: Iterable[str]) -> list[pb.UserScramCredentialRecord]:
    """One record per --add-scram, in order (a user given twice for one mechanism: the
    later wins on replay, as in Kafka)."""
    return [parse_one(text) for text in texts]
