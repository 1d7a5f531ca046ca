"""server/loop_slices.py: per-item work lets the event loop run every SLICE items, or
sooner when the items are slow (SLICE_SECONDS)."""

from __future__ import annotations

import asyncio
import time

from broker.loop_slices import SLICE, SLICE_SECONDS
from server.loop_slices import each


def _items_between_turns(items: int, cost_s: float, other_s: float = 0.0) -> list[int]:
    """How many items `each` went through between two turns of another task (whose turn
    holds the loop other_s)."""
    seen: list[int] = []

    async def scenario() -> None:
        done = 0
        stop = False

        async def ticker() -> None:
            while not stop:
                seen.append(done)
                if other_s:
                    time.sleep(other_s)
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        async for _ in each(range(items)):
            if cost_s:
                time.sleep(cost_s)  # an item's work, holding the loop
            done += 1
        stop = True
        await task

    asyncio.run(scenario())
    return [b - a for a, b in zip(seen, seen[1:], strict=False)]


def test_cheap_items_let_the_loop_run_every_slice():
    gaps = _items_between_turns(5 * SLICE, 0.0)
    assert max(gaps) <= SLICE
    assert sum(gaps) >= 4 * SLICE  # the ticker ran all along


def test_slow_items_let_the_loop_run_within_slice_seconds():
    cost = SLICE_SECONDS / 2
    gaps = _items_between_turns(40, cost)
    assert gaps and max(gaps) <= 3, gaps  # a count of SLICE alone would have held the loop 40 items


def test_a_slice_begins_when_the_task_runs_again():
    """Others' turns do not count against the next slice: with a neighbour holding the loop
    longer than SLICE_SECONDS each turn, cheap items still go SLICE at a time, not one."""
    gaps = _items_between_turns(5 * SLICE, 0.0, other_s=2 * SLICE_SECONDS)
    assert min(gaps[1:-1]) > SLICE // 2, gaps


def test_collected_drains_a_generator_in_slices():
    """A request's conversion written as a generator (server/kafka/fetch_api._asked) is
    drained by `collected`: every item, in order, the loop run between slices."""
    from server.loop_slices import collected
    from tests.server.loop_turns import others_ran

    items, turns = asyncio.run(others_ran(collected(i * 2 for i in range(5 * SLICE))))
    assert items == [i * 2 for i in range(5 * SLICE)]
    assert turns >= 4


def test_per_group_slices_by_item_within_one_group_and_keeps_the_order():
    """One group of many items (a topic of 100,000 partitions) is sliced by items, not
    taken as one slice; answers and groups come back in order."""
    from server.loop_slices import per_group
    from tests.server.loop_turns import others_ran

    groups = [("big", range(5 * SLICE)), ("empty", range(0)), ("small", range(3))]
    answer, turns = asyncio.run(
        others_ran(per_group(groups, lambda key, i: (key, i), lambda key, items: (key, items)))
    )
    assert [key for key, _ in answer] == ["big", "empty", "small"]
    assert answer[0][1] == [("big", i) for i in range(5 * SLICE)]
    assert answer[1][1] == [] and answer[2][1] == [("small", i) for i in range(3)]
    assert turns >= 4


def test_produce_requests_of_many_topics_are_converted_in_slices():
    """Both front ends' Produce conversions (server/client_messages.py, server/kafka/
    produce_api.py) slice by partitions and topics alike: a request of 5,000 topics of one
    partition each lets the loop run (one collected() per topic never did)."""
    import dataclasses

    from kio.index import load_request_schema

    from server import client_messages
    from server.kafka import produce_api
    from server.kafka.apis import PRODUCE, SERVED
    from strom_api.v1 import client_pb2
    from tests.server.loop_turns import others_ran
    from tests.server.test_kafka_group_apis import _element, sample

    grpc_request = client_pb2.ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topics=[
            client_pb2.ProduceRequest.Topic(
                name=f"t{i}",
                partitions=[client_pb2.ProduceRequest.Partition(partition=0, records=b"")],
            )
            for i in range(5 * SLICE)
        ],
    )
    converted, turns = asyncio.run(others_ran(client_messages.produce_request(grpc_request)))
    assert turns >= 4 and len(converted.topics) == 5 * SLICE
    body_type = load_request_schema(PRODUCE, SERVED[PRODUCE].max_version)
    topic_type = _element(body_type, "topic_data")
    partition = sample(_element(topic_type, "partition_data"))
    topics = tuple(
        dataclasses.replace(sample(topic_type), name=f"t{i}", partition_data=(partition,))
        for i in range(5 * SLICE)
    )
    body = dataclasses.replace(sample(body_type), topic_data=topics)
    converted, turns = asyncio.run(others_ran(produce_api.produce_request(body)))
    assert turns >= 4 and len(converted.topics) == 5 * SLICE


def test_each_of_groups_counts_items_across_groups():
    """50 groups of SLICE // 2 items: an `each` per group would never reach a slice's end;
    counted across the groups, the loop runs every SLICE items."""
    from server.loop_slices import each_of_groups
    from tests.server.loop_turns import others_ran

    groups = [(g, range(SLICE // 2)) for g in range(50)]

    async def drained() -> list[tuple[int, int]]:
        return [pair async for pair in each_of_groups(groups)]

    pairs, turns = asyncio.run(others_ran(drained()))
    assert pairs == [(g, i) for g in range(50) for i in range(SLICE // 2)]
    assert turns >= 20
