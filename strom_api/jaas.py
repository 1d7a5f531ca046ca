"""Kafka's `sasl.jaas.config` value, read as Kafka's JaasConfig reads it. No I/O.

    org.apache.kafka.common.security.scram.ScramLoginModule required
        username="alice" password="alice-secret";

    <login module> <flag> (<option>=<value>)* ;

The tokens are those of Java's StreamTokenizer as Kafka sets it up:
- bytes 0-32 are white space; `;` and `=` stand alone; everything else up to white space,
  `;`, `=`, a quote or `/` is one word (so an unquoted value cannot hold `/` or `=`);
- `"..."` and `'...'` are quoted values with Java's escapes (`\\n`, `\\t`, `\\b`, `\\f`,
  `\\r`, `\\a`, `\\v`, octal `\\NNN`, and `\\x` for any other x, so `\\"` and `\\\\`);
- `//` and a lone `/` comment to the end of the line, `/* ... */` a block.
The flag is required, requisite, sufficient or optional (any case); every entry ends with
`;`; a config value holds exactly one entry (Kafka's JaasContext rule for a client's or a
listener's sasl.jaas.config). A repeated option keeps its last value, as Kafka's map does.
Where Kafka's tokenizer quietly ends a quoted value at a line end (or the text's end), or a
block comment at the text's end, this reader refuses it: such a config was cut short.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_USER_PREFIX = "user_"

_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str  # lower case: required | requisite | sufficient | optional
    # Not in the repr: options hold passwords and client secrets.
    options: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class _Token:
    kind: str  # "word" (a word or a quoted value), "char" (an ordinary character) or "eof"
    text: str = ""


def _ordinary(char: str) -> bool:
    code = ord(char)
    return char in ";=" or 129 <= code <= 159  # 129-159: not word characters in Kafka's setup


class _Tokens:
    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def next(self) -> _Token:
        text, n = self._text, len(self._text)
        while self._pos < n:
            char = text[self._pos]
            if ord(char) <= 32:
                self._pos += 1
            elif char == "/":
                self._skip_comment()
            elif char in "\"'":
                return _Token("word", self._quoted(char))
            elif _ordinary(char):
                self._pos += 1
                return _Token("char", char)
            else:
                start = self._pos
                while self._pos < n and not self._ends_word(text[self._pos]):
                    self._pos += 1
                return _Token("word", text[start : self._pos])
        return _Token("eof")

    @staticmethod
    def _ends_word(char: str) -> bool:
        return ord(char) <= 32 or char in "/\"'" or _ordinary(char)

    def _skip_comment(self) -> None:
        text = self._text
        if text.startswith("/*", self._pos):
            end = text.find("*/", self._pos + 2)
            if end < 0:
                raise ValueError("JAAS config has a /* comment that is never closed")
            self._pos = end + 2
            return
        while self._pos < len(text) and text[self._pos] not in "\r\n":  # `//` or `/`
            self._pos += 1

    def _quoted(self, quote: str) -> str:
        text, out = self._text, list[str]()
        self._pos += 1
        while True:
            if self._pos >= len(text) or text[self._pos] in "\r\n":
                raise ValueError(f"JAAS config has a value opened with {quote} and never closed")
            char = text[self._pos]
            self._pos += 1
            if char == quote:
                return "".join(out)
            if char != "\\" or self._pos >= len(text):
                out.append(char)
                continue
            escaped = text[self._pos]
            self._pos += 1
            if escaped in "01234567":
                # Java: up to three octal digits, three only when the first is 0-3.
                digits, limit = escaped, 3 if escaped in "0123" else 2
                while len(digits) < limit and text[self._pos : self._pos + 1] in tuple("01234567"):
                    digits += text[self._pos]
                    self._pos += 1
                out.append(chr(int(digits, 8)))
            else:
                out.append(_ESCAPES.get(escaped, escaped))


def _entry(tokens: _Tokens, first: _Token) -> JaasEntry:
    if first.kind != "word":
        raise ValueError(
            f"JAAS config starts an entry with '{first.text}': expected a login module"
        )
    module = first.text
    token = tokens.next()
    if token.kind == "eof":
        raise ValueError("Login module control flag not specified in JAAS config")
    if token.kind != "word":
        raise ValueError("Login module control flag is not available in the JAAS config")
    flag = token.text.lower()
    if flag not in FLAGS:
        raise ValueError(
            f"Invalid login module control flag '{token.text}' in JAAS config: expected one "
            f"of {', '.join(FLAGS)}"
        )
    options: dict[str, str] = {}
    token = tokens.next()
    while token.kind != "eof" and token.text != ";":
        if token.kind != "word":
            raise ValueError(f"JAAS config has '{token.text}' where an option name should be")
        key = token.text
        equals, value = tokens.next(), None
        if equals.kind == "char" and equals.text == "=":
            value = tokens.next()
        if value is None or value.kind != "word":
            raise ValueError(f"Value not specified for key '{key}' in JAAS config")
        options[key] = value.text
        token = tokens.next()
    if token.text != ";":
        raise ValueError("JAAS config entry not terminated by semi-colon")
    return JaasEntry(module, flag, options)


def parse_jaas_config(text: str) -> JaasEntry:
    """The one login module entry of a sasl.jaas.config value; ValueError saying what is
    wrong otherwise."""
    tokens = _Tokens(text)
    entries = []
    token = tokens.next()
    while token.kind != "eof":
        entries.append(_entry(tokens, token))
        token = tokens.next()
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    if len(entries) != 1:
        raise ValueError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]


def login_credentials(entry: JaasEntry) -> tuple[str, str]:
    """(username, password) of a ScramLoginModule or PlainLoginModule entry: what a client
    authenticates with."""
    if entry.module not in (SCRAM_LOGIN_MODULE, PLAIN_LOGIN_MODULE):
        raise ValueError(
            f"login module {entry.module} carries no username and password: use "
            f"{SCRAM_LOGIN_MODULE} or {PLAIN_LOGIN_MODULE}"
        )
    missing = [key for key in ("username", "password") if key not in entry.options]
    if missing:
        raise ValueError(f"JAAS config of {entry.module} has no {' or '.join(missing)} option")
    return entry.options["username"], entry.options["password"]


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The PLAIN users a broker's PlainLoginModule entry declares, Kafka's way:
    `user_<name>="<password>"` (its username/password options are the broker's own, used
    when it connects to other brokers)."""
    if entry.module != PLAIN_LOGIN_MODULE:
        raise ValueError(
            f"PLAIN users are declared in a {PLAIN_LOGIN_MODULE} entry, not {entry.module}"
        )
    users = {}
    for key, password in entry.options.items():
        if key.startswith(PLAIN_USER_PREFIX):
            name = key[len(PLAIN_USER_PREFIX) :]
            if not name:
                raise ValueError(f"JAAS config option {key} names no user")
            users[name] = password
    return users
