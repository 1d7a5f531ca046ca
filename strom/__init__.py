"""The Strom client library (the `strom` command line is strom_tools, built on it).

The clients import from the package, as kafka-python's do from `kafka`:

    from strom import Producer, Consumer, AdminClient, TopicPartition

The names load on first use (PEP 562), so `strom server` and the other commands do not pay
for the whole client library at startup.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strom.admin import AdminClient, ConfigResource, NewTopic
    from strom.consumer import Consumer
    from strom.errors import AuthenticationError, KafkaTimeoutError, StromError
    from strom.fetcher import TopicPartition
    from strom.membership import CommitFailedError
    from strom.producer import Producer

_EXPORTS = {
    "Producer": "strom.producer",
    "Consumer": "strom.consumer",
    "AdminClient": "strom.admin",
    "NewTopic": "strom.admin",
    "ConfigResource": "strom.admin",
    "TopicPartition": "strom.fetcher",
    "StromError": "strom.errors",
    "KafkaTimeoutError": "strom.errors",
    "AuthenticationError": "strom.errors",
    "CommitFailedError": "strom.membership",
}

__all__ = [
    "AdminClient",
    "AuthenticationError",
    "CommitFailedError",
    "ConfigResource",
    "Consumer",
    "KafkaTimeoutError",
    "NewTopic",
    "Producer",
    "StromError",
    "TopicPartition",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'strom' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
