"""AlterUserScramCredentials and DescribeUserScramCredentials on the client side, shared by
AdminClient and `strom configs --entity-type users`: the password is salted here (with
strom_api/scram_credential.py) and only the salted password travels, as with Kafka's Admin
client; answers become per-user results or Kafka's error."""

from __future__ import annotations

import os
from typing import Any

from strom.errors import StromError, error_name
from strom_api import scram_credential
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2

MECHANISM_NAMES = {code: name for name, code in scram_credential.MECHANISM_CODES.items()}

Request = controller_pb2.AlterUserScramCredentialsRequest


def mechanism_code(user: str, mechanism: str) -> int:
    """Kafka's ScramMechanism type of a mechanism name; an unknown one fails here, without
    being sent, as in Kafka's client."""
    code = scram_credential.MECHANISM_CODES.get(mechanism)
    if code is None:
        raise StromError(
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"Unknown SCRAM mechanism '{mechanism}' for user '{user}': use "
            f"{' or '.join(scram_credential.MECHANISMS)}.",
        )
    return code


def upsertion(
    user: str, mechanism: str, iterations: int, password: bytes, salt: bytes | None = None
) -> Request.Upsertion:
    code = mechanism_code(user, mechanism)
    # Checked before salting too: an absurd count would keep this client busy for hours.
    try:
        scram_credential.check_iterations(mechanism, iterations)
    except ValueError as exc:
        raise StromError(ErrorCode.UNACCEPTABLE_CREDENTIAL, f"User '{user}': {exc}.") from None
    salt = os.urandom(scram_credential.SALT_BYTES) if salt is None else salt
    return Request.Upsertion(
        name=user,
        mechanism=code,
        iterations=iterations,
        salt=salt,
        salted_password=scram_credential.salted_password(mechanism, password, salt, iterations),
    )


def deletion(user: str, mechanism: str) -> Request.Deletion:
    return Request.Deletion(name=user, mechanism=mechanism_code(user, mechanism))


def _raise(error: Any) -> None:
    if error.code != 0:
        raise StromError(error_name(error.code), error.message, error.retriable)


def check_altered(response: Any) -> None:
    """Raises the first user's failure (the other users were altered all the same)."""
    for result in response.results:
        if result.HasField("error"):
            _raise(result.error)


def described(response: Any) -> dict[str, list[tuple[str, int]]]:
    """{user: [(mechanism, iterations), ...]}; raises the first failure."""
    if response.HasField("error"):
        _raise(response.error.error)
    out: dict[str, list[tuple[str, int]]] = {}
    for result in response.results:
        if result.HasField("error"):
            _raise(result.error)
        out[result.user] = [
            (MECHANISM_NAMES.get(i.mechanism, f"UNKNOWN({i.mechanism})"), i.iterations)
            for i in result.credential_infos
        ]
    return out
