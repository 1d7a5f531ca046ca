"""SCRAM credentials in the metadata log: AlterUserScramCredentials and
DescribeUserScramCredentials as the controller runs them (Kafka's checks and errors, per
user), their replay into the image, and the image written back as records (a snapshot)
rebuilding the same credentials."""

from __future__ import annotations

import pytest

from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.errors import ApiError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import decode, encode
from metadata.scram_control import (
    MAX_ALTERATIONS,
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from strom_api.scram_credential import client_key, salted_password, server_key, stored_key
from strom_api.v1 import metadata_pb2 as pb

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def upsert(user: str, mechanism: int = SHA512, iterations: int = 4096, password: str = "pw"):
    name = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-512")
    salted = salted_password(name, password.encode(), SALT, 4096)
    return ScramUpsertion(user, mechanism, iterations, SALT, salted)


def apply(image: MetadataImage, records) -> MetadataImage:
    return MetadataDelta(image).replay_all(records).apply(image.offset + len(records), 1)


def alter(image, deletions=(), upsertions=()):
    records, results = alter_user_scram_credentials(image, deletions, upsertions)
    return apply(image, records), sorted((u, e.error_name if e else "NONE") for u, e in results)


def test_an_upsertion_stores_rfc5802_keys_never_the_password():
    image, results = alter(EMPTY_IMAGE, upsertions=[upsert("alice", password="alice-secret")])
    assert results == [("alice", "NONE")]
    credential = image.scram_credential("alice", "SCRAM-SHA-512")
    salted = salted_password("SCRAM-SHA-512", b"alice-secret", SALT, 4096)
    assert credential is not None
    assert credential.salt == SALT and credential.iterations == 4096
    assert credential.stored_key == stored_key("SCRAM-SHA-512", client_key("SCRAM-SHA-512", salted))
    assert credential.server_key == server_key("SCRAM-SHA-512", salted)
    assert image.scram_credential("alice", "SCRAM-SHA-256") is None
    assert image.scram_credential("bob", "SCRAM-SHA-512") is None
    records, _ = alter_user_scram_credentials(EMPTY_IMAGE, [], [upsert("a", password="s3cr3t")])
    assert all(b"s3cr3t" not in encode(r) and salted not in encode(r) for r in records)


def test_kafka_checks_each_user_and_lets_the_others_through():
    image, _ = alter(EMPTY_IMAGE, upsertions=[upsert("alice"), upsert("dup")])
    deletions = [
        ScramDeletion("ghost", SHA512),  # nothing to delete
        ScramDeletion("alice", SHA256),  # alice has SHA-512 only
        ScramDeletion("dup", SHA512),
        ScramDeletion("dup", SHA512),
    ]
    upsertions = [
        upsert("bob"),
        upsert("carol", mechanism=3),
        upsert("", mechanism=SHA256),
        upsert("few", iterations=4095),
        upsert("many", iterations=16385),
        ScramUpsertion("nosalt", SHA256, 4096, b"", b"x"),
        ScramUpsertion("nokey", SHA256, 4096, SALT, b""),
        upsert("twice"),
        upsert("twice"),  # the same credential twice
        upsert("both", mechanism=SHA256),  # one user, two mechanisms: two credentials
        upsert("both", mechanism=SHA512),
        upsert("ghost"),  # already failed among the deletions: keeps that error
        upsert("alice", iterations=5000),  # another pair than alice's failed deletion
    ]
    image, results = alter(image, deletions, upsertions)
    assert results == [
        ("", "UNACCEPTABLE_CREDENTIAL"),
        ("alice", "NONE"),
        ("alice", "RESOURCE_NOT_FOUND"),
        ("bob", "NONE"),
        ("both", "NONE"),
        ("both", "NONE"),
        ("carol", "UNSUPPORTED_SASL_MECHANISM"),
        ("dup", "DUPLICATE_RESOURCE"),
        ("few", "UNACCEPTABLE_CREDENTIAL"),
        ("ghost", "RESOURCE_NOT_FOUND"),
        ("many", "UNACCEPTABLE_CREDENTIAL"),
        ("nokey", "UNACCEPTABLE_CREDENTIAL"),
        ("nosalt", "UNACCEPTABLE_CREDENTIAL"),
        ("twice", "DUPLICATE_RESOURCE"),
    ]
    assert sorted(image.scram.users()) == ["alice", "bob", "both", "dup"]
    assert len(image.scram.users()["both"]) == 2
    assert image.scram_credential("alice", "SCRAM-SHA-512").iterations == 5000


def test_the_boundaries_of_iterations_are_accepted():
    _, results = alter(EMPTY_IMAGE, upsertions=[upsert("a", iterations=4096)])
    assert results == [("a", "NONE")]
    _, results = alter(EMPTY_IMAGE, upsertions=[upsert("b", iterations=16384)])
    assert results == [("b", "NONE")]


def test_a_deletion_removes_one_mechanism_and_a_request_has_a_bound():
    image, _ = alter(EMPTY_IMAGE, upsertions=[upsert("alice")])
    image, _ = alter(image, upsertions=[upsert("alice", mechanism=SHA256, iterations=8192)])
    assert describe_user_scram_credentials(image, None) == {
        "alice": [ScramCredentialInfo(SHA256, 8192), ScramCredentialInfo(SHA512, 4096)]
    }
    image, results = alter(image, deletions=[ScramDeletion("alice", SHA512)])
    assert results == [("alice", "NONE")]
    assert image.scram_credential("alice", "SCRAM-SHA-512") is None
    assert image.scram_credential("alice", "SCRAM-SHA-256") is not None
    image, _ = alter(image, deletions=[ScramDeletion("alice", SHA256)])
    assert image.scram.users() == {} and not image.scram.mechanisms
    with pytest.raises(ApiError) as refused:
        alter_user_scram_credentials(
            image, [], [upsert(f"u{i}") for i in range(MAX_ALTERATIONS + 1)]
        )
    assert refused.value.error_name == "INVALID_REQUEST"


def test_describe_names_unknown_and_duplicate_users():
    image, _ = alter(EMPTY_IMAGE, upsertions=[upsert("alice"), upsert("bob", iterations=8192)])
    described = describe_user_scram_credentials(image, ["bob", "nobody", "alice", "alice"])
    assert described["bob"] == [ScramCredentialInfo(SHA512, 8192)]
    assert isinstance(described["nobody"], ApiError)
    assert described["nobody"].error_name == "RESOURCE_NOT_FOUND"
    assert isinstance(described["alice"], ApiError)
    assert described["alice"].error_name == "DUPLICATE_RESOURCE"
    assert list(describe_user_scram_credentials(image, [])) == ["alice", "bob"]


def test_credentials_survive_a_snapshot_and_unchanged_parts_are_shared():
    image, _ = alter(
        EMPTY_IMAGE,
        upsertions=[upsert("alice"), upsert("bob", mechanism=SHA256, iterations=5000)],
    )
    records = [decode(encode(r)) for r in image.records()]
    assert [type(r) for r in records] == [pb.UserScramCredentialRecord] * 2
    rebuilt = apply(EMPTY_IMAGE, records)
    assert rebuilt.scram == image.scram
    # A change to one mechanism's users leaves the other mechanism's map shared.
    changed, _ = alter(image, upsertions=[upsert("carol")])
    assert changed.scram.mechanisms["SCRAM-SHA-256"] is image.scram.mechanisms["SCRAM-SHA-256"]
    # A delta without SCRAM records keeps the whole part.
    assert apply(image, [pb.NoOpRecord()]).scram is image.scram


def test_replay_refuses_records_that_cannot_apply():
    with pytest.raises(MetadataReplayError, match="unknown SCRAM mechanism 7"):
        apply(EMPTY_IMAGE, [pb.UserScramCredentialRecord(name="a", mechanism=7)])
    with pytest.raises(MetadataReplayError, match="has no SCRAM-SHA-256 credential"):
        apply(EMPTY_IMAGE, [pb.RemoveUserScramCredentialRecord(name="a", mechanism=1)])


def test_an_upsertion_is_never_printed_with_its_salted_password():
    u = upsert("alice")
    assert u.salted_password.hex() not in repr(u) and repr(u.salted_password) not in repr(u)
