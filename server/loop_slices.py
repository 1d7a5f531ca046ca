"""Work on a request's items in slices, letting the event loop run between them.

A request may name hundreds of thousands of partitions within the message size limit (the
fuzzer's DeleteRecords of seed 16, case 324: 248,300 partitions of 9,932 topics, about 2 s
of Python on the loop). Raft, heartbeats, health and every other request share the node's
one event loop, so per-item work yields to them every SLICE items or SLICE_SECONDS,
whichever comes first (an item may cost a microsecond or a hundred: a group deletion the
coordinator refuses took 70 us while its refusals' tracebacks were garbage to collect)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Protocol, TypeVar

from broker.loop_slices import LoopSlices

P_co = TypeVar("P_co", covariant=True)
A = TypeVar("A")
Item = TypeVar("Item")
K = TypeVar("K")
G = TypeVar("G")
T = TypeVar("T")


async def each(items: Iterable[T]) -> AsyncIterator[T]:
    """The items, one by one, the loop let run others every SLICE of them."""
    slices = LoopSlices()
    for item in items:
        yield item
        await slices.step()


async def each_of_groups(
    groups: Iterable[tuple[K, Iterable[Item]]],
) -> AsyncIterator[tuple[K, Item]]:
    """Each (key, item) of the groups, the loop let run others every SLICE items counted
    across the groups: an `each` per group would count afresh in every group, so 500
    topics of 999 partitions would never reach a slice's end."""
    slices = LoopSlices()
    for key, items in groups:
        for item in items:
            yield key, item
            await slices.step()
        await slices.step()  # a group of no items is work too


async def collected(items: Iterable[T]) -> list[T]:
    """list(items), the loop let run others every SLICE of them (a generator converting a
    request's items runs as it is drained)."""
    out: list[T] = []
    slices = LoopSlices()
    for item in items:
        out.append(item)
        await slices.step()
    return out


class _Topic(Protocol[P_co]):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Iterable[P_co]: ...


async def per_partition(
    topics: Iterable[_Topic[P_co]], answer: Callable[[str, P_co], A]
) -> list[tuple[str, list[A]]]:
    """Each topic's name and `answer(name, partition)` for each of its partitions, in the
    request's order, in slices: the loop runs others every SLICE partitions."""
    # The name read once per topic: protobuf decodes it anew at every read
    # (server/request_items.py).
    return await per_item(((topic.name, topic.partitions) for topic in topics), answer)


async def per_item(
    groups: Iterable[tuple[K, Iterable[Item]]], answer: Callable[[K, Item], A]
) -> list[tuple[K, list[A]]]:
    """Each group's key and `answer(key, item)` for each of its items, in order, in slices
    of items, not of groups: one topic may name a hundred thousand partitions (the Kafka
    fuzzer's DescribeProducers of seed 15, case 39: 112,500 of one topic, a 1.5 s stall
    when each topic was one slice)."""
    out: list[tuple[K, list[A]]] = []
    slices = LoopSlices()
    for key, items in groups:
        answers: list[A] = []
        for item in items:
            answers.append(answer(key, item))
            await slices.step()
        out.append((key, answers))
        await slices.step()  # a group of no items is work too
    return out


async def per_group(
    groups: Iterable[tuple[K, Iterable[Item]]],
    answer: Callable[[K, Item], A],
    group: Callable[[K, list[A]], G],
) -> list[G]:
    """per_item, then each group's answers made one by `group(key, answers)` (a kio topic
    of its partitions, say), in slices too: a request may name 100,000 topics as well."""
    return await collected(group(key, answers) for key, answers in await per_item(groups, answer))
