"""A small reader and rewriter for datadriven test scripts (etcd-io/raft's `testdata/*.txt`).

A script is a sequence of blocks separated by blank lines. Lines starting with `#` outside a
block are comments. A block is one command line, a `----` line, then the expected output up
to the next blank line (or the end of the file); an output has no blank lines of its own.

    tick 1 100
    ----
    [t=100] 1: Unattached epoch=0 -> Prospective epoch=0

`run_script` runs every command through a callable and compares outputs. In rewrite mode it
writes the actual outputs back into the file instead (comments and commands untouched), so a
change in behaviour is reviewed as a diff of the script.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STORY_COMMANDS = 12  # how many of the preceding commands a failure shows


class ScriptFormatError(Exception):
    pass


@dataclass(frozen=True)
class Case:
    line: int  # 1-based line number of the command
    command: str
    expected: str
    out_start: int  # 0-based index of the first expected-output line
    out_end: int  # one past the last


def parse(path: Path) -> tuple[list[str], list[Case]]:
    lines = path.read_text().split("\n")
    cases = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "----":
            raise ScriptFormatError(f"{path}:{i + 1}: expected a '----' line after {line!r}")
        start = end = i + 2
        while end < len(lines) and lines[end].strip():
            end += 1
        cases.append(Case(i + 1, line.strip(), "\n".join(lines[start:end]), start, end))
        i = end
    return lines, cases


def run_script(path: Path, run: Callable[[str], str], rewrite: bool) -> None:
    """Runs every command of the script at `path` through `run`; raises AssertionError with
    the story so far and a diff at the first output that differs (rewrite: updates the file)."""
    __tracebackhide__ = True
    lines, cases = parse(path)
    story: list[str] = []
    actuals: list[str] = []
    for case in cases:
        try:
            actual = run(case.command)
        except Exception as e:
            raise AssertionError(
                _story(story)
                + f"\n{path}:{case.line}: `{case.command}` raised {type(e).__name__}: {e}"
            ) from e
        if any(not line.strip() for line in actual.split("\n")) and actual:
            raise AssertionError(f"{path}:{case.line}: output has a blank line:\n{actual}")
        if not rewrite and actual != case.expected:
            diff = difflib.unified_diff(
                case.expected.split("\n"),
                actual.split("\n"),
                "expected",
                "actual",
                lineterm="",
            )
            raise AssertionError(
                _story(story)
                + f"\n{path}:{case.line}: the output of `{case.command}` differs:\n"
                + "\n".join(diff)
                + "\n(if the change is intended: STROM_REWRITE=1 pytest tests/raft, "
                "then review the diff of the script)"
            )
        story += [case.command, "----", actual, ""]
        actuals.append(actual)
    if rewrite:
        for case, actual in reversed(list(zip(cases, actuals, strict=True))):
            lines[case.out_start : case.out_end] = actual.split("\n") if actual else []
        path.write_text("\n".join(lines))


def _story(story: list[str]) -> str:
    blocks = "\n".join(story).split("\n\n")
    shown = [b for b in blocks if b][-STORY_COMMANDS:]
    skipped = len([b for b in blocks if b]) - len(shown)
    head = (
        f"The story so far ({skipped} earlier commands not shown):\n"
        if skipped
        else ("The story so far:\n")
    )
    return head + "\n\n".join(shown) + "\n" if shown else ""
