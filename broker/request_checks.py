"""Checks a request gets before any of it is served."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)


def named_twice(keys: Iterable[Key]) -> set[Key]:
    """The keys (partitions) a request names more than once: Kafka answers each copy
    INVALID_REQUEST rather than serving it twice."""
    seen: set[Key] = set()
    twice: set[Key] = set()
    for key in keys:
        (twice if key in seen else seen).add(key)
    return twice
