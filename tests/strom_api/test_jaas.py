"""strom_api/jaas.py: sasl.jaas.config values as Kafka's JaasConfig reads them (cases after
Kafka's JaasContextTest), and the credentials taken from them."""

from __future__ import annotations

import pytest

from strom_api.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    login_credentials,
    parse_jaas_config,
    plain_users,
)


def test_the_tutorials_scram_line():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="alice-secret";'
    )
    assert entry == JaasEntry(
        SCRAM_LOGIN_MODULE, "required", {"username": "alice", "password": "alice-secret"}
    )
    assert login_credentials(entry) == ("alice", "alice-secret")


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_flags_in_any_case(flag):
    assert parse_jaas_config(f"test.Module {flag};") == JaasEntry("test.Module", flag.lower())


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("key1=value1", {"key1": "value1"}),
        ("key1 = value1 key2= value2", {"key1": "value1", "key2": "value2"}),
        ('key1="value1" key2 ="v a l u e 2"', {"key1": "value1", "key2": "v a l u e 2"}),
        ("key1='single quoted'", {"key1": "single quoted"}),
        ('key1="a\\"b\\\\c"', {"key1": 'a"b\\c'}),
        ('key1="tab\\tnl\\nlit\\q"', {"key1": "tab\tnl\nlitq"}),
        ('key1="oct\\101\\0612\\477"', {"key1": "octA12'7"}),
        ('key1="a=b;c/d"', {"key1": "a=b;c/d"}),
        ("key1=$VALUE-1.2_x@host:9", {"key1": "$VALUE-1.2_x@host:9"}),
        ("key1=a key1=b", {"key1": "b"}),
        ('key1="" key2=ünï', {"key1": "", "key2": "ünï"}),
    ],
)
def test_option_forms(options, expected):
    assert parse_jaas_config(f"test.Module required {options};").options == expected


def test_comments_and_line_breaks():
    text = (
        "/* the client */ test.Module\n"
        "  required // flag\n"
        "  user=alice / the rest of this line is a comment too\n"
        "  password='x' ;\n"
    )
    assert parse_jaas_config(text) == JaasEntry(
        "test.Module", "required", {"user": "alice", "password": "x"}
    )


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("", "Login module not specified in JAAS config"),
        ("  // only a comment", "Login module not specified"),
        ("test.Module", "Login module control flag not specified in JAAS config"),
        ("test.Module ;", "Login module control flag is not available"),
        ("test.Module mandatory;", "Invalid login module control flag 'mandatory'"),
        ("test.Module required", "not terminated by semi-colon"),
        ("test.Module required key=value", "not terminated by semi-colon"),
        ("test.Module required key;", "Value not specified for key 'key'"),
        ("test.Module required key=;", "Value not specified for key 'key'"),
        ("test.Module required key=", "Value not specified for key 'key'"),
        ("test.Module required =value;", "where an option name should be"),
        ("test.Module required key=a=b;", "where an option name should be"),
        ("; test.Module required;", "expected a login module"),
        ("test.Module required; other.Module optional;", "contains 2 login modules"),
        ('test.Module required key="open;', "never closed"),
        ('test.Module required key="line\nbreak";', "never closed"),
        ("test.Module required /* open;", "never closed"),
    ],
)
def test_malformed_configs(text, sentence):
    with pytest.raises(ValueError, match=sentence):
        parse_jaas_config(text)


def test_login_credentials_of_plain_and_their_absence():
    plain = parse_jaas_config(
        f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret";'
    )
    assert login_credentials(plain) == ("admin", "admin-secret")
    with pytest.raises(ValueError, match="has no password option"):
        login_credentials(parse_jaas_config(f"{SCRAM_LOGIN_MODULE} required username=a;"))
    with pytest.raises(ValueError, match="carries no username and password"):
        login_credentials(
            parse_jaas_config(
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            )
        )


def test_plain_users_of_a_broker_entry():
    entry = parse_jaas_config(
        f"{PLAIN_LOGIN_MODULE} required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret"\n'
        '  user_alice="alice-secret";'
    )
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(ValueError, match="names no user"):
        plain_users(parse_jaas_config(f"{PLAIN_LOGIN_MODULE} required user_=x;"))
    with pytest.raises(ValueError, match="are declared in a"):
        plain_users(parse_jaas_config(f"{SCRAM_LOGIN_MODULE} required user_a=x;"))
