"""ISR changes leave in batches: changes proposed while a request is out go together in the
next one, and each partition gets its own answer (accepted, refused, or none at all)."""

from __future__ import annotations

import asyncio

from broker.alter_partition_sender import AlterPartitionSender
from broker.partition import Partition
from broker.partition_leader import IsrChange
from broker.topic_settings import TopicSettings
from metadata.image import PartitionRegistration
from storage.config import LogConfig
from storage.log import Log
from strom_api.v1 import common_pb2, controller_pb2


def led_partitions(tmp_path, count):
    out = []
    for i in range(count):
        settings = TopicSettings(log=LogConfig())
        p = Partition("t", i, b"t" * 16, Log.open(str(tmp_path / f"t-{i}")), 1, settings)
        p.apply_registration(
            PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=3),
            0,
            settings,
        )
        out.append(p)
    return out


def test_changes_made_while_a_request_is_out_share_the_next_request(tmp_path):
    partitions = led_partitions(tmp_path, 5)
    requests = []
    answers = []

    async def controller(method, request):
        requests.append(request)
        await asyncio.sleep(0.05)
        response = controller_pb2.AlterPartitionResponse()
        for p in request.partitions:
            out = response.partitions.add(topic_id=p.topic_id, partition=p.partition)
            if p.partition == 3:
                out.error.code = common_pb2.INELIGIBLE_REPLICA
                out.error.message = "broker 2 is fenced"
            else:
                out.isr.extend(p.new_isr)
                out.partition_epoch = p.partition_epoch + 1
        return response

    async def run():
        sender = AlterPartitionSender(
            1, lambda: 7, controller, lambda p, c, a: answers.append((p.index, a))
        )
        change = IsrChange((1,), (), (2,))
        for p in partitions:
            p.leader.pending = change  # as isr_change_needed leaves it
        sender.submit(partitions[0], change)
        await asyncio.sleep(0.01)  # the first request is out; these four wait for it
        for p in partitions[1:]:
            sender.submit(p, change)
        while len(answers) < 5:
            await asyncio.sleep(0.01)
        await sender.stop()
        return sender

    sender = asyncio.run(run())
    assert sender.requests_sent == 2
    assert [len(r.partitions) for r in requests] == [1, 4]
    assert all(r.broker_epoch == 7 and r.broker_id == 1 for r in requests)
    by_partition = dict(answers)
    assert by_partition[3].error.code == common_pb2.INELIGIBLE_REPLICA
    assert list(by_partition[4].isr) == [1]


def test_no_answer_reaches_every_partition_as_none(tmp_path):
    partitions = led_partitions(tmp_path, 2)
    answers = []

    async def unreachable(method, request):
        return None

    async def run():
        sender = AlterPartitionSender(1, lambda: 7, unreachable, lambda p, c, a: answers.append(a))
        for p in partitions:
            p.leader.pending = change = IsrChange((1,), (), (2,))
            sender.submit(p, change)
        while len(answers) < 2:
            await asyncio.sleep(0.01)

    asyncio.run(run())
    assert answers == [None, None]


def test_a_change_the_metadata_settled_is_not_sent(tmp_path):
    [partition] = led_partitions(tmp_path, 1)
    sent = []

    async def controller(method, request):
        sent.append(request)

    async def run():
        sender = AlterPartitionSender(1, lambda: 7, controller, lambda p, c, a: None)
        change = IsrChange((1,), (), (2,))
        partition.leader.pending = change
        sender.submit(partition, change)
        partition.leader.pending = None  # a metadata delta settled the ISR first
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert sent == []
