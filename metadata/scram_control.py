"""Users' SCRAM credentials as the controller runs them: AlterUserScramCredentials and
DescribeUserScramCredentials, as pure functions over a MetadataImage (after Kafka's
ScramControlManager and the brokers' describeScramCredentials).

`alter_user_scram_credentials` returns the records to write and a result per user and
changes nothing (the records change the image once committed and replayed). The client
salts the password (as Kafka's Admin client does); the controller keeps only what RFC 5802
needs to check a proof: salt, stored key, server key, iterations (strom_api/scram_credential
derives them). Kafka's checks, per user: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM,
an empty name, empty salt or salted password, or iterations outside 4096..16384
UNACCEPTABLE_CREDENTIAL, deleting a credential that does not exist RESOURCE_NOT_FOUND, and a
user's credential for one mechanism named twice in one request (deletions and upsertions
together) DUPLICATE_RESOURCE. A credential that fails gets its error and no records; the
others go ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from metadata.delta import MECHANISM_NAMES
from metadata.errors import ApiError
from metadata.image import MetadataImage, scram_record
from strom_api.error_codes import ErrorCode
from strom_api.scram_credential import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    credential_from_salted,
)
from strom_api.v1 import metadata_pb2 as pb

# Bounds on one request, so that a single call cannot make the controller derive keys
# (or write records) without end; Kafka bounds its requests by their size instead.
MAX_ALTERATIONS = 1000
MAX_DESCRIBED_USERS = 10_000


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    user: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # a salted password is a password equivalent: never logged
        return f"ScramUpsertion({self.user!r}, {self.mechanism}, {self.iterations})"


def _mechanism_error(user: str, mechanism: int) -> ApiError | None:
    """Kafka's validateScramUsernameAndMechanism."""
    if mechanism not in MECHANISM_NAMES:
        return ApiError(
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"Unknown SCRAM mechanism {mechanism} for user '{user}': use 1 (SCRAM-SHA-256) "
            "or 2 (SCRAM-SHA-512).",
        )
    if not user:
        return ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty.")
    return None


def _upsertion_error(u: ScramUpsertion) -> ApiError | None:
    error = _mechanism_error(u.user, u.mechanism)
    if error is not None:
        return error
    name = MECHANISM_NAMES[u.mechanism]
    if u.iterations < MIN_ITERATIONS:
        return ApiError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too few iterations for user '{u.user}': {u.iterations} is below the minimum "
            f"{MIN_ITERATIONS} of {name}.",
        )
    if u.iterations > MAX_ITERATIONS:
        return ApiError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too many iterations for user '{u.user}': {u.iterations} is above the maximum "
            f"{MAX_ITERATIONS} of {name}.",
        )
    if not u.salt:
        return ApiError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL, f"The salt for user '{u.user}' is empty."
        )
    if not u.salted_password:
        return ApiError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL, f"The salted password for user '{u.user}' is empty."
        )
    return None


def _deletion_error(image: MetadataImage, d: ScramDeletion) -> ApiError | None:
    error = _mechanism_error(d.user, d.mechanism)
    if error is not None:
        return error
    if image.scram_credential(d.user, MECHANISM_NAMES[d.mechanism]) is None:
        return ApiError(
            ErrorCode.RESOURCE_NOT_FOUND,
            f"Attempt to delete a user credential that does not exist: user '{d.user}' has "
            f"no {MECHANISM_NAMES[d.mechanism]} credential.",
        )
    return None


def _duplicate(user: str, mechanism: int) -> ApiError:
    name = MECHANISM_NAMES.get(mechanism, str(mechanism))
    return ApiError(
        ErrorCode.DUPLICATE_RESOURCE,
        f"A user credential cannot be altered twice in the same request: user '{user}', {name}.",
    )


def check_alterations(count: int) -> None:
    """INVALID_REQUEST past MAX_ALTERATIONS deletions and upsertions in one request: checked
    by the front ends too, before they convert a request's items."""
    if count > MAX_ALTERATIONS:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"{count} SCRAM credential alterations in one request: "
            f"at most {MAX_ALTERATIONS} are allowed.",
        )


def check_described(count: int) -> None:
    """INVALID_REQUEST past MAX_DESCRIBED_USERS named users (the front ends check it too)."""
    if count > MAX_DESCRIBED_USERS:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"{count} users in one DescribeUserScramCredentials: at most "
            f"{MAX_DESCRIBED_USERS} are allowed.",
        )


def alter_user_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> tuple[list[Message], list[tuple[str, ApiError | None]]]:
    """(records, [(user, error or None), ...]): one result per credential altered, in
    Kafka's order (deletions, upsertions, then the failures), so a user may have several.
    A credential is a (user, mechanism) pair: one user may change both mechanisms in one
    request (Kafka's documented `--add-config 'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]'`),
    but naming the same pair twice is DUPLICATE_RESOURCE for that pair."""
    check_alterations(len(deletions) + len(upsertions))
    Key = tuple[str, int]
    errors: dict[Key, ApiError] = {}
    to_delete: dict[Key, ScramDeletion] = {}
    to_upsert: dict[Key, ScramUpsertion] = {}
    for d in deletions:
        key = (d.user, d.mechanism)
        if key in errors:
            continue
        if to_delete.pop(key, None) is not None:
            errors[key] = _duplicate(*key)
        elif (error := _deletion_error(image, d)) is not None:
            errors[key] = error
        else:
            to_delete[key] = d
    for u in upsertions:
        key = (u.user, u.mechanism)
        if key in errors:
            continue
        if to_delete.pop(key, None) is not None or to_upsert.pop(key, None) is not None:
            errors[key] = _duplicate(*key)
        elif (error := _upsertion_error(u)) is not None:
            errors[key] = error
        else:
            to_upsert[key] = u
    records: list[Message] = []
    results: list[tuple[str, ApiError | None]] = []
    for d in to_delete.values():
        records.append(pb.RemoveUserScramCredentialRecord(name=d.user, mechanism=d.mechanism))
        results.append((d.user, None))
    for u in to_upsert.values():
        mechanism = MECHANISM_NAMES[u.mechanism]
        credential = credential_from_salted(mechanism, u.salt, u.salted_password, u.iterations)
        records.append(scram_record(u.user, credential))
        results.append((u.user, None))
    results.extend((user, error) for (user, _), error in errors.items())
    return records, results


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    """What DescribeUserScramCredentials tells of a credential: never its keys."""

    mechanism: int
    iterations: int


def describe_user_scram_credentials(
    image: MetadataImage, users: Sequence[str] | None
) -> dict[str, list[ScramCredentialInfo] | ApiError]:
    """Every user with a credential (no `users`), or the users named: RESOURCE_NOT_FOUND for
    one without a credential, DUPLICATE_RESOURCE for one named twice (Kafka's
    describeScramCredentials)."""
    known = image.scram.users()
    if not users:
        names = sorted(known)
    else:
        check_described(len(users))
        names = list(dict.fromkeys(users))
    seen: dict[str, int] = {}
    for user in users or ():
        seen[user] = seen.get(user, 0) + 1
    out: dict[str, list[ScramCredentialInfo] | ApiError] = {}
    for user in names:
        if seen.get(user, 0) > 1:
            out[user] = ApiError(
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}",
            )
        elif user not in known:
            out[user] = ApiError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {user}",
            )
        else:
            out[user] = [
                ScramCredentialInfo(MECHANISM_CODES[c.mechanism], c.iterations) for c in known[user]
            ]
    return out
