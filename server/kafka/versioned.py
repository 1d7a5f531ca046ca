"""A message of one version from values given for every version.

kio has one frozen dataclass per version of each message (and of each nested type, in the
version's module). A front end builds its answer once, version-independently; `build` keeps
the fields the version has. The fields Metadata's older versions lack (leader_epoch before
v7, topic_id before v10, the authorized operations) are "ignorable" in Kafka's schemas: a
response of such a version leaves them out."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, TypeVar

T = TypeVar("T")


def build(cls: type[T], **values: Any) -> T:
    """`cls` from those of `values` it has a field for."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(message: type[Any], name: str) -> type[Any]:
    """A nested type of the same version as `message` (e.g. MetadataResponseTopic)."""
    found = getattr(sys.modules[message.__module__], name)
    assert isinstance(found, type)
    return found


def _field_names(cls: type[Any]) -> frozenset[str]:
    cached = _FIELDS.get(cls)
    if cached is None:
        cached = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return cached


_FIELDS: dict[type[Any], frozenset[str]] = {}
