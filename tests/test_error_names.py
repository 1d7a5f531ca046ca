"""Errors are named by enum member, never by string literal (issue 19): in every shipped
package, a str literal equal to an error name (strom_api.error_codes.ErrorCode, or the
client's own strom.errors.ClientErrorName) fails here, so `"NOT_LEADER_OR_FOLLOWER"` cannot
come back where `ErrorCode.NOT_LEADER_OR_FOLLOWER` belongs. mypy holds the same line where
an error is built (metadata.errors.ApiError and strom.errors.StromError take only members);
this test also covers comparisons, sets and maps, which mypy lets a str into.

The only literals allowed are the members' own values in their enum's class body. raft/ is
left out: the Raft core imports nothing from strom_api and keeps its own constants
(raft/messages.py). Docstrings and messages may name errors in prose; only a literal that is
exactly a name counts."""

from __future__ import annotations

import ast
from pathlib import Path

from strom.errors import ClientErrorName
from strom_api.error_codes import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "storage",
    "metadata",
    "coordinator",
    "broker",
    "server",
    "strom_api",
    "strom",
    "pyspark_strom",
    "strom_tools",
]
ERROR_NAMES = frozenset(ErrorCode) | frozenset(ClientErrorName)


def _enum_member_values(tree: ast.AST) -> set[int]:
    """ids of the literals that define an enum's members (`NAME = "NAME"` in a class
    deriving from an Enum)."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(base) for base in node.bases]
        if not any(base.endswith("Enum") for base in bases):
            continue
        for statement in node.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
                allowed.add(id(statement.value))
    return allowed


def error_name_literals(source: str, filename: str) -> list[str]:
    """`file:line: "NAME"` for every str literal in `source` that is an error name."""
    tree = ast.parse(source, filename)
    allowed = _enum_member_values(tree)
    literals = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in ERROR_NAMES
        and id(node) not in allowed
    ]
    literals.sort(key=lambda node: (node.lineno, node.col_offset))
    return [f"{filename}:{node.lineno}: {node.value!r}" for node in literals]


def shipped_modules() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if not path.name.endswith(("_pb2.py", "_pb2_grpc.py"))
    )


def test_no_error_name_is_a_string_literal() -> None:
    found = [
        literal
        for path in shipped_modules()
        for literal in error_name_literals(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, "name these errors by ErrorCode (or ClientErrorName) member:\n" + "\n".join(
        found
    )


def test_the_check_sees_comparisons_sets_maps_and_calls() -> None:
    source = (
        "if error.name == 'NOT_LEADER_OR_FOLLOWER': pass\n"
        "RETRIABLE = frozenset({'NETWORK_EXCEPTION'})\n"
        "BY_NAME = {'TOPIC_AUTHORIZATION_FAILED': 1}\n"
        "raise StromError(\"ILLEGAL_STATE\", 'closed')\n"
    )
    assert error_name_literals(source, "m.py") == [
        "m.py:1: 'NOT_LEADER_OR_FOLLOWER'",
        "m.py:2: 'NETWORK_EXCEPTION'",
        "m.py:3: 'TOPIC_AUTHORIZATION_FAILED'",
        "m.py:4: 'ILLEGAL_STATE'",
    ]


def test_the_check_leaves_enum_definitions_prose_and_members_alone() -> None:
    source = (
        "class ErrorCode(enum.StrEnum):\n"
        "    NONE = 'NONE'\n"
        "'''A docstring naming NOT_LEADER_OR_FOLLOWER.'''\n"
        "message = 'NOT_LEADER_OR_FOLLOWER: moved'\n"
        "if error.name == ErrorCode.NOT_LEADER_OR_FOLLOWER: pass\n"
    )
    assert error_name_literals(source, "m.py") == []


def test_every_shipped_package_is_scanned() -> None:
    # A package added later joins PACKAGES (or is left out here with its reason, as raft/).
    shipped = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert shipped - {"tests", "bench", "raft"} <= set(PACKAGES), shipped - set(PACKAGES)
