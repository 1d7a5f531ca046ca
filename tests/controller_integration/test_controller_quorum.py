"""Three controller nodes in one process: real Raft drivers over gRPC on loopback, each with
its MetadataLoader and QuorumController.

Operations go to the active controller and every node's image follows; a standby refuses
them with NOT_CONTROLLER; when the active controller stops, a standby takes over without a
reload, re-seeds broker sessions and still fences a broker that stopped heartbeating; a
node restarted from its snapshot plus the log's tail reaches the same image.
"""

from __future__ import annotations

import asyncio

import pytest

from metadata.alter_partition import IsrProposal
from metadata.broker_lifecycle import BrokerRegistrationRequest, HeartbeatRequest
from metadata.config_control import OpType
from metadata.controller import ControllerConfig, QuorumController
from metadata.errors import ApiError
from metadata.image import Endpoint
from metadata.loader import MetadataLoader
from metadata.topic_control import NewTopic
from raft.config import RaftConfig
from raft.driver import RaftDriver
from strom_api.v1 import metadata_pb2 as pb
from tests.raft_integration.process_cluster import free_ports, wait_for

RAFT = RaftConfig(
    election_timeout_ms=500,
    fetch_timeout_ms=1500,
    election_backoff_max_ms=200,
    request_timeout_ms=500,
    append_linger_ms=2,
    max_retention_bytes=0,
)
CONTROLLER = ControllerConfig(
    heartbeat_interval_ms=200, session_timeout_ms=1500, max_bytes_between_snapshots=1
)


class Node:
    def __init__(
        self,
        node_id: int,
        voters: dict[int, str],
        data: str,
        config: ControllerConfig = CONTROLLER,
    ) -> None:
        self.loader = MetadataLoader()
        self.driver = RaftDriver(node_id, voters, voters[node_id], data, self.loader, RAFT)
        self.controller = QuorumController(self.driver, self.loader, config)

    async def start(self) -> None:
        await self.driver.start()
        self.controller.start()

    async def stop(self, graceful: bool = True) -> None:
        await self.controller.stop()
        await self.driver.stop(graceful)


def active(nodes) -> Node | None:
    return next((n for n in nodes if n.driver.core and n.controller.is_active()), None)


def test_controllers_agree_fail_over_fence_and_restart_from_snapshots(tmp_path):
    async def scenario() -> None:
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
        nodes = {i: Node(i, voters, str(tmp_path / f"c{i}")) for i in voters}
        for n in nodes.values():
            await n.start()
        try:
            first = await wait_for(lambda: active(nodes.values()), 10, "an active controller")
            standby = next(n for n in nodes.values() if n is not first)
            with pytest.raises(ApiError) as refused:
                await standby.controller.create_topics([NewTopic("x", 1, 1)])
            assert refused.value.error_name == "NOT_CONTROLLER"

            epochs = {}
            for broker_id in (101, 102, 103):
                epochs[broker_id] = await first.controller.register_broker(
                    BrokerRegistrationRequest(
                        broker_id, bytes([broker_id]) * 16, [Endpoint("PLAINTEXT", "h", broker_id)]
                    )
                )
            for broker_id, epoch in epochs.items():
                response = await first.controller.broker_heartbeat(
                    HeartbeatRequest(broker_id, epoch, first.loader.image.offset)
                )
                assert not response.is_fenced
            results = await first.controller.create_topics(
                [NewTopic("orders", 6, 3), NewTopic("bad", 1, 4)]
            )
            assert results[0].error is None
            assert results[1].error is not None
            assert results[1].error.error_name == "INVALID_REPLICATION_FACTOR"
            # The leader of a partition led by broker 101 (which stays alive) shrinks its
            # ISR; a stale repeat of it is refused.
            topic = first.loader.image.topics.by_name["orders"]
            pid, p = next((i, p) for i, p in sorted(topic.partitions.items()) if p.leader == 101)
            shrink = IsrProposal(topic.topic_id, pid, p.leader_epoch, p.partition_epoch, (101,))
            [result] = await first.controller.alter_partition(101, epochs[101], [shrink])
            assert result.error is None
            assert first.loader.image.topics.partition("orders", pid).isr == (101,)
            [result] = await first.controller.alter_partition(101, epochs[101], [shrink])
            assert result.error is not None and result.error.error_name == "INVALID_UPDATE_VERSION"
            blocks = [await first.controller.allocate_producer_ids(101, epochs[101]) for _ in "ab"]
            assert blocks == [(0, 1000), (1000, 1000)]

            image = first.loader.image
            await wait_for(
                lambda: all(n.loader.image.topics == image.topics for n in nodes.values()),
                10,
                "every controller's image to hold the topic",
            )

            # Brokers 101 and 102 keep heartbeating; 103 has stopped. The active controller
            # stops, a standby takes over and fences 103 a session timeout later.
            async def keep_beating(stop: asyncio.Event) -> None:
                while not stop.is_set():
                    for broker_id in (101, 102):
                        for n in nodes.values():
                            try:
                                await n.controller.broker_heartbeat(
                                    HeartbeatRequest(
                                        broker_id, epochs[broker_id], n.loader.image.offset
                                    )
                                )
                            except ApiError:
                                pass
                    await asyncio.sleep(0.1)

            stop = asyncio.Event()
            beating = asyncio.create_task(keep_beating(stop))
            await first.stop(graceful=True)
            rest = [n for n in nodes.values() if n is not first]
            second = await wait_for(lambda: active(rest), 10, "a new active controller")
            await wait_for(
                lambda: second.loader.image.cluster.brokers[103].fenced, 10, "broker 103 fenced"
            )
            brokers = second.loader.image.cluster.brokers
            assert not brokers[101].fenced and not brokers[102].fenced
            for p in second.loader.image.topics.by_name["orders"].partitions.values():
                assert 103 not in p.isr and p.leader in (101, 102)
            stop.set()
            await beating
            await second.controller.create_topics([NewTopic("after", 2, 2)])

            # The old controller restarts from its own snapshot plus the log's tail.
            old = first.driver.node_id
            nodes[old] = Node(old, voters, str(tmp_path / f"c{old}"))
            await nodes[old].start()

            def same_image() -> bool:
                mine, theirs = nodes[old].loader.image, second.loader.image
                return mine.offset == theirs.offset and (mine.cluster, mine.topics) == (
                    theirs.cluster,
                    theirs.topics,
                )

            await wait_for(same_image, 10, "the restarted controller to reach the same image")
            assert nodes[old].driver.snapshots.latest() is not None
        finally:
            for n in nodes.values():
                if n.driver._task is not None and not n.driver._task.done():
                    await n.stop(graceful=False)

    asyncio.run(scenario())


def test_failover_in_the_middle_of_an_operation_converges(tmp_path):
    """The active controller dies while CreateTopics is in flight: the caller gets
    NOT_CONTROLLER (never a hang), its retry on the new controller either creates the topic
    or finds that the first attempt committed after all (TOPIC_ALREADY_EXISTS), and every
    controller's image ends the same, with the topic exactly once."""

    async def scenario() -> None:
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
        # Brokers that never time out: this test is about the controllers.
        config = ControllerConfig(session_timeout_ms=600_000, max_bytes_between_snapshots=1)
        nodes = {i: Node(i, voters, str(tmp_path / f"c{i}"), config) for i in voters}
        for n in nodes.values():
            await n.start()
        try:
            leader = await wait_for(lambda: active(nodes.values()), 10, "an active controller")
            for broker_id in (101, 102):
                epoch = await leader.controller.register_broker(
                    BrokerRegistrationRequest(
                        broker_id, bytes([broker_id]) * 16, [Endpoint("PLAINTEXT", "h", 1)]
                    )
                )
                await leader.controller.broker_heartbeat(
                    HeartbeatRequest(broker_id, epoch, leader.loader.image.offset)
                )
            # Stop it at different moments: before its records are proposed, after they are
            # proposed (they may still commit under the next leader), after they committed.
            for round_, delay_s in enumerate((0.0, 0.004, 0.008, 0.05)):
                first = await wait_for(lambda: active(nodes.values()), 10, "an active one")
                name = f"t{round_}"
                attempt = asyncio.create_task(
                    first.controller.create_topics([NewTopic(name, 3, 1)])
                )
                await asyncio.sleep(delay_s)
                await first.stop(graceful=False)
                try:
                    [result] = await attempt
                    first_error = None if result.error is None else result.error.error_name
                except ApiError as error:
                    first_error = error.error_name
                assert first_error in (None, "NOT_CONTROLLER")
                rest = [n for n in nodes.values() if n is not first]
                second = await wait_for(
                    lambda rest=rest: active(rest), 10, "a new active controller"
                )
                [retry] = await second.controller.create_topics([NewTopic(name, 3, 1)])
                if retry.error is not None:
                    assert retry.error.error_name == "TOPIC_ALREADY_EXISTS"
                # The stopped controller comes back and catches up; all images agree.
                old = first.driver.node_id
                nodes[old] = Node(old, voters, str(tmp_path / f"c{old}"), config)
                await nodes[old].start()

                def agree() -> bool:
                    images = [n.loader.image for n in nodes.values()]
                    return len({i.offset for i in images}) == 1 and all(
                        i.topics == images[0].topics for i in images
                    )

                await wait_for(agree, 15, "every controller's image to agree")
                image = nodes[old].loader.image
                assert name in image.topics.by_name
                assert len(image.topics.by_name[name].partitions) == 3
        finally:
            for n in nodes.values():
                if n.driver._task is not None and not n.driver._task.done():
                    await n.stop(graceful=False)

    asyncio.run(scenario())


def test_a_heartbeat_waiting_behind_a_slow_operation_keeps_the_broker_alive(tmp_path):
    """Found by tests/chaos: a live broker fenced right after a controller failover, because
    its heartbeat waited for the controller's lock (a slow commit) behind the periodic
    fencing check. Contact now counts when the heartbeat arrives, as in Kafka, though its
    answer waits for the writes before it to commit."""

    async def scenario() -> None:
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
        nodes = [Node(i, voters, str(tmp_path / f"c{i}")) for i in voters]
        for n in nodes:
            await n.start()
        try:
            leader = await wait_for(lambda: active(nodes), 10, "an active controller")
            controller = leader.controller
            epoch = await controller.register_broker(
                BrokerRegistrationRequest(101, bytes([101]) * 16, [Endpoint("PLAINTEXT", "h", 1)])
            )
            response = await controller.broker_heartbeat(
                HeartbeatRequest(101, epoch, leader.loader.image.offset)
            )
            assert not response.is_fenced
            fenced_ever = []
            leader.loader.publishers.append(
                lambda delta, image: fenced_ever.append(image.cluster.brokers[101].fenced)
            )
            session_s = CONTROLLER.session_timeout_ms / 1000
            # A slow write (Raft waiting on a disk) ahead of the heartbeat: the heartbeat's
            # answer waits for it to commit, its contact counts at once.
            driver = leader.driver
            real_append = driver.append

            async def slow_append(records):  # type: ignore[no-untyped-def]
                driver.append = real_append  # type: ignore[method-assign]
                await asyncio.sleep(session_s * 1.2)
                return await real_append(records)

            driver.append = slow_append  # type: ignore[method-assign]
            slow = asyncio.create_task(controller.allocate_producer_ids(101, epoch))
            await asyncio.sleep(session_s * 0.6)
            beat = asyncio.create_task(
                controller.broker_heartbeat(
                    HeartbeatRequest(101, epoch, leader.loader.image.offset)
                )
            )
            await asyncio.sleep(session_s * 0.6)  # past the session since the last one
            assert not beat.done()  # it waits for the slow write before it
            await slow
            assert not (await beat).is_fenced
            await asyncio.sleep(0.3)  # the periodic check has run since
            assert not any(fenced_ever)  # not even fenced and at once unfenced again
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(scenario())


def test_operations_pipeline_against_the_pending_image_and_commit_in_order(tmp_path):
    """Issue 19: an operation no longer waits for the one before it to commit. Two creates
    of one name sent together: the second is computed against the first's pending records
    (TOPIC_ALREADY_EXISTS) before either commits; a registration pipelined behind them gets
    the offset its record lands at as its broker epoch."""

    async def scenario() -> None:
        (port,) = free_ports(1)
        voters = {1: f"127.0.0.1:{port}"}
        node = Node(1, voters, str(tmp_path / "c1"))
        await node.start()
        try:
            leader = await wait_for(lambda: active([node]), 10, "an active controller")
            controller = leader.controller
            epoch = await controller.register_broker(
                BrokerRegistrationRequest(1, bytes([1]) * 16, [Endpoint("PLAINTEXT", "h", 1)])
            )
            await controller.broker_heartbeat(HeartbeatRequest(1, epoch, epoch + 1))
            committed = leader.loader.image.offset
            first = asyncio.create_task(controller.create_topics([NewTopic("t", 1, 1)]))
            second = asyncio.create_task(controller.create_topics([NewTopic("t", 1, 1)]))
            register = asyncio.create_task(
                controller.register_broker(
                    BrokerRegistrationRequest(2, bytes([2]) * 16, [Endpoint("PLAINTEXT", "h", 2)])
                )
            )
            await asyncio.sleep(0)  # all three computed and appended, none committed
            assert controller.core.pending == 3
            assert leader.loader.image.offset == committed
            [created] = await first
            [refused] = await second
            assert created.error is None
            assert refused.error is not None
            assert refused.error.error_name == "TOPIC_ALREADY_EXISTS"
            epoch = await register
            assert leader.loader.image.cluster.brokers[2].epoch == epoch
            assert epoch == committed + 2  # after the topic's two records
        finally:
            await node.stop(graceful=False)

    asyncio.run(scenario())


def test_stopping_the_controller_fails_its_pending_operations(tmp_path):
    """A node shutting down stops its controller before its servers and Raft: a request
    still waiting for its commit is answered NOT_CONTROLLER at once (the client retries on
    the next controller), and the stopped controller takes no new one."""

    async def scenario() -> None:
        (port,) = free_ports(1)
        node = Node(1, {1: f"127.0.0.1:{port}"}, str(tmp_path / "c1"))
        await node.start()
        try:
            leader = await wait_for(lambda: active([node]), 10, "an active controller")
            controller = leader.controller
            driver = leader.driver
            real_append = driver.append

            async def stuck_append(records):  # type: ignore[no-untyped-def]
                await asyncio.sleep(30)  # a disk that hangs
                return await real_append(records)

            driver.append = stuck_append  # type: ignore[method-assign]
            create = asyncio.create_task(
                controller.register_broker(
                    BrokerRegistrationRequest(1, bytes([1]) * 16, [Endpoint("PLAINTEXT", "h", 1)])
                )
            )
            await asyncio.sleep(0.05)
            assert not create.done() and controller.core.pending == 1
            await controller.stop()
            with pytest.raises(ApiError) as refused:
                await asyncio.wait_for(create, 1)
            assert refused.value.error_name == "NOT_CONTROLLER"
            assert not controller.is_active()
            with pytest.raises(ApiError):
                await controller.create_topics([NewTopic("u", 1, 1)])
        finally:
            await node.driver.stop(graceful=False)

    asyncio.run(scenario())


async def one_active_controller(data: str, config: ControllerConfig) -> Node:
    """A single-voter quorum, started, its controller active."""
    (port,) = free_ports(1)
    node = Node(1, {1: f"127.0.0.1:{port}"}, data, config)
    await node.start()
    try:
        return await wait_for(lambda: active([node]), 10, "an active controller")
    except BaseException:
        await node.stop(graceful=False)
        raise


async def unfenced_brokers(node: Node, broker_ids: tuple[int, ...]) -> dict[int, int]:
    """Registers the brokers and unfences them with a heartbeat each: their epochs."""
    epochs = {}
    for broker_id in broker_ids:
        epochs[broker_id] = await node.controller.register_broker(
            BrokerRegistrationRequest(
                broker_id, bytes([broker_id]) * 16, [Endpoint("PLAINTEXT", "h", broker_id)]
            )
        )
        await node.controller.broker_heartbeat(
            HeartbeatRequest(broker_id, epochs[broker_id], node.loader.image.offset)
        )
    return epochs


def test_a_leaderless_partition_gets_an_unclean_leader_once_its_topic_allows_one(tmp_path):
    """unclean.leader.election.enable set after a partition went offline: no broker event
    follows, and the controller's periodic check (unclean.leader.election.interval.ms, as
    Kafka 3.9's) elects the live replica that is out of the ISR."""

    async def scenario() -> None:
        config = ControllerConfig(
            heartbeat_interval_ms=200,
            session_timeout_ms=1500,
            unclean_leader_election_interval_ms=300,
        )
        leader = await one_active_controller(str(tmp_path / "c1"), config)
        stop = asyncio.Event()
        beating: asyncio.Task[None] | None = None
        try:
            controller = leader.controller
            epochs = await unfenced_brokers(leader, (1, 2))
            [created] = await controller.create_topics([NewTopic("t", 1, 2)])
            assert created.error is None
            p = leader.loader.image.topics.partition("t", 0)
            first, other = p.leader, next(b for b in (1, 2) if b != p.leader)
            shrink = IsrProposal(
                leader.loader.image.topics.by_name["t"].topic_id,
                0,
                p.leader_epoch,
                p.partition_epoch,
                (first,),
            )
            [result] = await controller.alter_partition(first, epochs[first], [shrink])
            assert result.error is None

            async def keep_beating() -> None:  # only the replica out of the ISR
                while not stop.is_set():
                    await controller.broker_heartbeat(
                        HeartbeatRequest(other, epochs[other], leader.loader.image.offset)
                    )
                    await asyncio.sleep(0.1)

            beating = asyncio.create_task(keep_beating())
            await wait_for(
                lambda: leader.loader.image.topics.partition("t", 0).leader == -1,
                10,
                "the partition offline once its only ISR member is fenced",
            )
            await asyncio.sleep(1.0)  # several checks: unclean elections are not allowed yet
            assert leader.loader.image.topics.partition("t", 0).leader == -1
            enable = [("unclean.leader.election.enable", OpType.SET, "true")]
            results = await controller.incremental_alter_configs([((pb.TOPIC, "t"), enable)], False)
            assert results == {(pb.TOPIC, "t"): None}
            await wait_for(
                lambda: leader.loader.image.topics.partition("t", 0).leader == other,
                10,
                "the live replica elected uncleanly",
            )
            assert leader.loader.image.topics.partition("t", 0).isr == (other,)
        finally:
            stop.set()
            if beating is not None:
                await beating
            await leader.stop(graceful=False)

    asyncio.run(scenario())


def test_auto_leader_rebalance_gives_a_partition_back_to_its_preferred_leader(tmp_path):
    """auto.leader.rebalance.enable with leader.imbalance.check.interval.seconds: a broker
    that left and came back into the ISR leads its preferred partition again, on the
    controller's periodic check, with no request asking for it."""

    async def scenario() -> None:
        config = ControllerConfig(
            heartbeat_interval_ms=200,
            session_timeout_ms=60_000,
            leader_imbalance_check_interval_ms=300,
        )
        leader = await one_active_controller(str(tmp_path / "c1"), config)
        try:
            controller = leader.controller
            image = lambda: leader.loader.image  # noqa: E731
            epochs = await unfenced_brokers(leader, (1, 2))
            [created] = await controller.create_topics([NewTopic("r", 2, 2)])
            assert created.error is None
            topic = image().topics.by_name["r"]
            pid = next(i for i, p in topic.partitions.items() if p.replicas[0] == 2)
            # Broker 2 asks to be fenced: broker 1 takes the partition, 2 leaves its ISR.
            await controller.broker_heartbeat(
                HeartbeatRequest(2, epochs[2], image().offset, want_fence=True)
            )
            assert image().topics.partition("r", pid).leader == 1
            await controller.broker_heartbeat(HeartbeatRequest(2, epochs[2], image().offset))
            assert not image().cluster.brokers[2].fenced
            p = image().topics.partition("r", pid)
            expand = IsrProposal(topic.topic_id, pid, p.leader_epoch, p.partition_epoch, (1, 2))
            [result] = await controller.alter_partition(1, epochs[1], [expand])
            assert result.error is None and image().topics.partition("r", pid).leader == 1
            await wait_for(
                lambda: image().topics.partition("r", pid).leader == 2,
                10,
                "the preferred leader elected again",
            )
        finally:
            await leader.stop(graceful=False)

    asyncio.run(scenario())
