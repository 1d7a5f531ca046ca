"""The part of a request that must keep its connection's order (server/kafka/connection.py
pipelines a connection's requests): a handler tells, through ORDERED_PART_DONE, when that
part is done and the rest of its work (a Produce's acks=all wait) may overlap the next
requests. A handler that never tells holds the connection until it is answered."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

ORDERED_PART_DONE: ContextVar[Callable[[], None] | None] = ContextVar(
    "strom_kafka_ordered_part_done", default=None
)
