"""Kafka's `ssl.principal.mapping.rules` (KIP-371, SslPrincipalMapper): how the subject
distinguished name of a client certificate becomes a user name. No I/O.

    ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT

- Rules are comma separated, tried in order, the first that matches wins.
  `RULE:<pattern>/<replacement>/[L|U]`: the pattern must match the whole DN; every match of
  it in the DN is replaced (Java's replaceAll), then the result is lower-cased (L) or
  upper-cased (U). `\\` escapes a `/` (or anything) in the pattern and replacement; `$n`
  is the n-th group, and, as in Kafka, a `$n` beyond the pattern's groups is literal text.
  `DEFAULT` gives the DN unchanged (Kafka's default value).
- The splitting is Kafka's own regular expression, so a pattern may hold commas
  (`RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/`) and empty items between commas are skipped.
- A DN no rule matches has no principal: the connection is refused (NoMatchingRule), as
  Kafka fails its authentication.
- Patterns are Python regular expressions; Kafka's are Java's. The usual syntax is common
  to both; a pattern Python cannot compile is refused at startup, naming it.
- Decided beyond Kafka: a value with no rule at all (empty, or only commas) is refused at
  startup; Kafka would accept it and then refuse every certificate. A `$n` in a pattern
  without groups is refused at startup; Kafka would fail each matching connection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from storage.errors import InvalidConfigError

CONFIG = "ssl.principal.mapping.rules"
DEFAULT_RULES = "DEFAULT"

# Kafka's SslPrincipalMapper.RULE_PATTERN: DEFAULT | RULE:pattern/replacement/[LU] | other.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(Exception):
    """No rule maps this DN: the client has no principal and is refused."""


@dataclass(frozen=True)
class Rule:
    """One RULE (pattern set) or DEFAULT (pattern None)."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:  # Kafka's Rule.toString, which its tests read
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (
            f"/{self.case}" if self.case else ""
        )


@dataclass(frozen=True)
class PrincipalMapper:
    rules: tuple[Rule, ...]

    def name(self, dn: str) -> str:
        """The user name of a certificate's subject DN (RFC 2253 form)."""
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"


DEFAULT_MAPPER = PrincipalMapper((Rule(),))


def _group_reference(replacement: str, at: int, groups: int) -> tuple[int | None, int]:
    """Java's Matcher.appendReplacement reading `$<digits>` at `at` (the first digit):
    the longest prefix of the digits that names an existing group. (None, end of the
    digits) when even the first digit names none: Kafka then keeps the text literal."""
    first = int(replacement[at])
    if first > groups:
        end = at
        while end < len(replacement) and replacement[end].isdigit():
            end += 1
        return None, end
    number, end = first, at + 1
    while end < len(replacement) and replacement[end].isdigit():
        longer = number * 10 + int(replacement[end])
        if longer > groups:
            break
        number, end = longer, end + 1
    return number, end


def _expand(replacement: str, match: re.Match[str]) -> str:
    out, i, groups = [], 0, match.re.groups
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            out.append(replacement[i + 1])  # a trailing backslash is refused at parse time
            i += 2
        elif char == "$" and replacement[i + 1 : i + 2] == "{":
            end = replacement.index("}", i)
            out.append(match.group(replacement[i + 2 : end]) or "")
            i = end + 1
        elif char == "$":
            number, end = _group_reference(replacement, i + 1, groups)
            out.append(replacement[i:end] if number is None else match.group(number) or "")
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _check_replacement(replacement: str, pattern: re.Pattern[str], setting: str) -> None:
    """What Java would refuse when the rule is applied, refused at startup instead."""
    i = 0
    while i < len(replacement):
        char, following = replacement[i], replacement[i + 1 : i + 2]
        problem = ""
        if char == "\\" and not following:
            problem = "ends with a lone backslash"
        elif char == "$" and following == "{":
            end = replacement.find("}", i)
            name = replacement[i + 2 : end] if end > 0 else ""
            if name not in pattern.groupindex:
                problem = f"refers to group {{{name}}}, which the pattern does not name"
        elif char == "$" and not following.isdigit():
            problem = "has a $ that is neither $<number> nor ${<name>}"
        elif char == "$" and pattern.groups == 0 and following != "0":
            problem = f"refers to group ${following}, but the pattern has no groups"
        if problem:
            raise InvalidConfigError(
                f"invalid value for config '{setting}': the replacement '{replacement}' {problem}"
            )
        i += 2 if char == "\\" else 1


def _parse_rule(text: str, setting: str) -> Rule | None:
    match = _PARSER.match(text)
    if match is None or match.end() != len(text):
        unmatched = text if match is None else text[match.end() :]
        raise InvalidConfigError(
            f"invalid value for config '{setting}': invalid rule `{text}`, unmatched "
            f"substring `{unmatched}` (expected RULE:pattern/replacement/[L|U] or DEFAULT)"
        )
    if match.group(1) is not None:
        return Rule()
    if match.group(2) is None:
        return None  # an empty item between commas
    source, replacement, case = match.group(2), match.group(4), match.group(6)
    try:
        pattern = re.compile(source)
    except re.error as exc:
        raise InvalidConfigError(
            f"invalid value for config '{setting}': the pattern of rule `{text}` does not "
            f"compile: {exc}"
        ) from None
    _check_replacement(replacement, pattern, setting)
    return Rule(pattern, replacement, case)


def split_rules(text: str) -> list[str]:
    """Kafka's splitting of the value into rule texts (empty ones included)."""
    return [m.group(1) for m in _SPLITTER.finditer(text.strip())]


def parse_rules(text: str | None, setting: str = CONFIG) -> PrincipalMapper:
    """The mapper of an ssl.principal.mapping.rules value (None: Kafka's DEFAULT);
    InvalidConfigError naming `setting` (the key as given) when a rule is malformed."""
    if text is None:
        return DEFAULT_MAPPER
    rules = [r for item in split_rules(text) if (r := _parse_rule(item, setting)) is not None]
    if not rules:
        raise InvalidConfigError(
            f"invalid value '{text}' for config '{setting}': it has no rule, so no "
            f"certificate could be mapped to a principal (Kafka's default is {DEFAULT_RULES})"
        )
    return PrincipalMapper(tuple(rules))
