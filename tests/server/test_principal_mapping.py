"""server/principal_mapping.py: Kafka's SslPrincipalMapperTest cases, ported (valid and
invalid rules, mapping, Kafka's rule splitting as its toString shows it, commas inside a
pattern), and the replacement rules Java's replaceAll applies."""

from __future__ import annotations

import re

import pytest

from server.principal_mapping import (
    DEFAULT_MAPPER,
    NoMatchingRule,
    parse_rules,
)
from storage.errors import InvalidConfigError


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules):
    parse_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_invalid_rules_name_the_config(rules):
    with pytest.raises(InvalidConfigError, match="config 'ssl.principal.mapping.rules'"):
        parse_rules(rules)


def test_the_setting_as_given_is_named():
    setting = "listener.name.client.ssl.principal.mapping.rules"
    with pytest.raises(InvalidConfigError, match=f"config '{setting}': invalid rule `DEFAUL`"):
        parse_rules("DEFAUL", setting)


def test_kafkas_mapping_cases():
    mapper = parse_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == (
        "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        # empty rules are ignored
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
        (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
        # rules rule
        (
            r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, "
            r"RULE:, DEFAULT, /DEFAULT, DEFAULT]",
            r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, "
            r"DEFAULT, /DEFAULT/,DEFAULT",
        ),
    ],
)
def test_rules_splitting(expected, rules):
    assert str(parse_rules(rules)) == expected


@pytest.mark.parametrize("rules", ["", ",   , , ,      , , ,   "])
def test_a_value_without_any_rule_is_refused_not_left_to_refuse_every_client(rules):
    # Kafka maps nothing with it ("[]"); Strom says so at startup.
    with pytest.raises(InvalidConfigError, match="it has no rule"):
        parse_rules(rules)


def test_comma_with_whitespace():
    mapper = parse_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_no_matching_rule_refuses_the_dn():
    mapper = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x,OU=Other"):
        mapper.name("CN=x,OU=Other")


def test_default_when_not_set():
    assert parse_rules(None) is DEFAULT_MAPPER
    assert DEFAULT_MAPPER.name("CN=a,O=b") == "CN=a,O=b"


@pytest.mark.parametrize(
    ("rule", "dn", "expected"),
    [
        # Java's $n: the longest group number that exists; past the groups, literal text.
        ("RULE:^CN=(a)(b)$/$12$3/", "CN=ab", "a2$3"),
        (
            "RULE:^CN=(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)(.)$/$11-$1-$0/",
            "CN=abcdefghijk",
            "k-a-CN=abcdefghijk",
        ),
        (r"RULE:^CN=(\w+)$/\$1 is $1/", "CN=dave", "$1 is dave"),
        ("RULE:^CN=(?P<user>\\w+)$/${user}!/", "CN=erin", "erin!"),
        ("RULE:^CN=(\\w+)(,O=(x))?$/$1$3/", "CN=frank", "frank"),  # unmatched group: ""
        ("RULE:^CN=(a|b)+$/$1/", "CN=abab", "b"),
    ],
)
def test_replacements_as_javas_replace_all(rule, dn, expected):
    assert parse_rules(rule).name(dn) == expected


@pytest.mark.parametrize(
    ("rule", "sentence"),
    [
        ("RULE:^CN=.*$/$1/", "refers to group $1, but the pattern has no groups"),
        ("RULE:^CN=(.*)$/$x/", "neither $<number> nor ${<name>}"),
        ("RULE:^CN=(.*)$/a$/", "neither"),
        ("RULE:^CN=(.*)$/${who}/", "refers to group {who}"),
        ("RULE:^CN=(.*$/$1/", "does not compile"),
    ],
)
def test_replacements_java_would_fail_on_are_refused_at_startup(rule, sentence):
    with pytest.raises(
        InvalidConfigError, match=f"ssl.principal.mapping.rules.*{re.escape(sentence)}"
    ):
        parse_rules(rule)
