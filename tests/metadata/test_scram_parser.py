"""`strom storage format --add-scram` text, as Kafka's ScramParser reads it: records with the
keys RFC 5802 derives (never the password), Kafka's sentence for each mistake."""

from __future__ import annotations

import base64

import pytest

from metadata.scram_parser import parse, parse_one
from storage.errors import InvalidConfigError
from strom_api.scram_credential import new_credential, salted_password, server_key


def test_a_password_becomes_a_salted_credential():
    record = parse_one("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert (record.name, record.mechanism, record.iterations) == ("admin", 2, 4096)
    assert len(record.salt) == 32  # a fresh random salt
    assert b"admin-secret" not in record.SerializeToString()
    salted = salted_password("SCRAM-SHA-512", b"admin-secret", record.salt, 4096)
    assert record.server_key == server_key("SCRAM-SHA-512", salted)


def test_iterations_salt_and_quotes():
    salt = base64.b64encode(b"1lv4pdnw4fwq7notcxm0yy1k7q").decode()
    record = parse_one(f'SCRAM-SHA-256=[name=alice,iterations=8192,salt="{salt}",password=pw]')
    expected = new_credential("SCRAM-SHA-256", "pw", 8192, b"1lv4pdnw4fwq7notcxm0yy1k7q")
    assert (record.mechanism, record.iterations, record.salt) == (1, 8192, expected.salt)
    assert record.stored_key == expected.stored_key


def test_a_salted_password_is_taken_as_given():
    salted = salted_password("SCRAM-SHA-512", b"pw", b"NaCl", 4096)
    text = (
        f"SCRAM-SHA-512=[name=alice,salt={base64.b64encode(b'NaCl').decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]"
    )
    record = parse_one(text)
    assert record.stored_key == new_credential("SCRAM-SHA-512", "pw", salt=b"NaCl").stored_key


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        (
            "SCRAM-SHA-1=[name=a,password=b]",
            "The add-scram mechanism SCRAM-SHA-1 is not supported.",
        ),
        ("SCRAM-SHA-512", "No equals sign found in SCRAM component: SCRAM-SHA-512"),
        ("SCRAM-SHA-512=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-512=[name=a,password=b", "Expected configuration string to end with ]"),
        ("SCRAM-SHA-512=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-512=[name=,password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-512=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-512=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
        ("SCRAM-SHA-512=[name=a,passwordb]", "No equals sign found in SCRAM component: passwordb"),
        ("SCRAM-SHA-512=[name=a,iterations=4095,password=b]", "must be >= 4096"),
        ("SCRAM-SHA-512=[name=a,iterations=16385,password=b]", "must be <= 16384"),
        ("SCRAM-SHA-512=[name=a,iterations=many,password=b]", "is not an integer: many"),
        (
            "SCRAM-SHA-512=[name=a,salt=%%%,password=b]",
            "The 'salt' value of add-scram is not base64",
        ),
        ("SCRAM-SHA-512=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with"),
        ("SCRAM-SHA-512=[name=a,salt=AAAA,saltedpassword=AAAA,password=b]", "only supply one"),
    ],
)
def test_bad_text_gets_kafkas_sentence(text, sentence):
    with pytest.raises(InvalidConfigError) as refused:
        parse([text])
    assert sentence in str(refused.value)
    assert refused.value.error_name == "INVALID_CONFIG"
