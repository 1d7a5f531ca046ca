"""server/offsets_topic_creator.py: __consumer_offsets is asked for once, however many
callers need it at once or one after another, until the controller says it exists."""

from __future__ import annotations

import asyncio

from server.offsets_topic_creator import OffsetsTopicCreator


class Controller:
    def __init__(self, answers: list[bool | Exception]) -> None:
        self.answers = answers
        self.asked = 0

    async def create(self) -> bool:
        self.asked += 1
        await asyncio.sleep(0.01)  # a round trip to the controller
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_concurrent_and_later_callers_share_one_request_once_it_exists():
    controller = Controller([True])
    creator = OffsetsTopicCreator(controller.create)

    async def scenario() -> None:
        await asyncio.gather(*(creator() for _ in range(100)))
        for _ in range(1000):  # a FindCoordinator of 1,000 keys, before the image has it
            await creator()

    asyncio.run(scenario())
    assert controller.asked == 1
    assert creator.created


def test_an_ask_that_failed_is_made_again_by_the_next_caller():
    controller = Controller([RuntimeError("controller unreachable"), False, True])
    creator = OffsetsTopicCreator(controller.create)

    async def scenario() -> None:
        for _ in range(5):
            await creator()

    asyncio.run(scenario())
    assert controller.asked == 3
    assert creator.created
