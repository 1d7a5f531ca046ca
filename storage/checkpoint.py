"""Kafka's checkpoint files, in Kafka's own text format, written atomically.

    <version>            0
    <entry count>        n
    <entry>              one per line, fields separated by one space

Offset checkpoints (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint`, one per log directory) hold `topic partition offset` lines;
the `leader-epoch-checkpoint` of each partition holds `epoch startOffset` lines.
"""

from __future__ import annotations

from storage.errors import StorageError
from storage.file_io import atomic_write, remove_leftover_temp

VERSION = 0


def write_lines(path: str, entries: list[tuple[object, ...]]) -> None:
    lines = [str(VERSION), str(len(entries))]
    lines += [" ".join(str(field) for field in entry) for entry in entries]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_lines(path: str, fields: int) -> list[list[str]]:
    """The entries of a checkpoint, [] if it does not exist; a malformed file raises."""
    remove_leftover_temp(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise StorageError(f"checkpoint {path} is not text") from None
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise StorageError(f"checkpoint {path} has no valid version and count lines") from None
    if version != VERSION:
        raise StorageError(f"checkpoint {path} has unknown version {version}")
    entries = [line.split(" ") for line in lines[2:] if line]
    if len(entries) != count or any(len(e) != fields for e in entries):
        raise StorageError(f"checkpoint {path} is malformed: expected {count} entries of {fields}")
    return entries


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_lines(path, [(t, p, o) for (t, p), o in sorted(offsets.items())])


def read_int_entries(path: str, fields: int, int_fields: int) -> list[list[str | int]]:
    """Entries whose last `int_fields` fields are integers; a bad one raises StorageError."""
    entries: list[list[str | int]] = []
    for entry in read_lines(path, fields):
        text, numbers = entry[: fields - int_fields], entry[fields - int_fields :]
        try:
            entries.append([*text, *(int(n) for n in numbers)])
        except ValueError:
            raise StorageError(f"checkpoint {path} has a non-integer field in {entry}") from None
    return entries


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    return {(str(t), int(p)): int(o) for t, p, o in read_int_entries(path, 3, 2)}
