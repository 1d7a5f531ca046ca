"""The bootstrap checkpoint's records (`strom storage format --add-scram`) reach the
metadata log once: three real controllers (Raft over gRPC on loopback) each hold their own
copy (each formatted with its own random salt); the first active controller of the empty
log writes its copy in the same batch as its first write, the next active controller and a
controller restarted from its snapshot do not write theirs."""

from __future__ import annotations

import asyncio

from metadata.broker_lifecycle import BrokerRegistrationRequest
from metadata.controller import ControllerConfig, QuorumController
from metadata.image import Endpoint, scram_record
from metadata.loader import MetadataLoader
from metadata.topic_control import NewTopic
from raft.driver import RaftDriver
from server import bootstrap_checkpoint
from strom_api.scram_credential import new_credential
from tests.controller_integration.test_controller_quorum import RAFT, active
from tests.raft_integration.process_cluster import free_ports, wait_for

# A heartbeat interval this long keeps the periodic task (which also writes the bootstrap
# records of an idle controller) asleep, so the first operation is the first write.
QUIET = ControllerConfig(heartbeat_interval_ms=600_000, session_timeout_ms=1_200_000)


class Node:
    def __init__(self, node_id, voters, data, config, salt: bytes) -> None:
        self.salt = salt
        self.records = [
            scram_record("admin", new_credential("SCRAM-SHA-512", "admin-secret", salt=salt))
        ]
        # What `strom storage format --add-scram` leaves and a node reads back at start.
        bootstrap_checkpoint.write(str(data), self.records)
        self.loader = MetadataLoader()
        self.scram_replays = 0  # credentials replayed by this node, over every image

        def count(delta, image) -> None:
            self.scram_replays += len(delta.scram.changed)

        self.loader.publishers.append(count)
        self.driver = RaftDriver(node_id, voters, voters[node_id], str(data), self.loader, RAFT)
        self.controller = QuorumController(
            self.driver,
            self.loader,
            config,
            bootstrap_records=bootstrap_checkpoint.read(str(data)),
        )

    async def start(self) -> None:
        await self.driver.start()
        self.controller.start()

    async def stop(self, graceful: bool = True) -> None:
        await self.controller.stop()
        await self.driver.stop(graceful)


def _salt(node) -> bytes | None:
    credential = node.loader.image.scram_credential("admin", "SCRAM-SHA-512")
    return None if credential is None else credential.salt


def test_bootstrap_records_are_written_once_with_the_first_write(tmp_path):
    async def scenario() -> None:
        voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(free_ports(3))}
        config = ControllerConfig(
            heartbeat_interval_ms=QUIET.heartbeat_interval_ms,
            session_timeout_ms=QUIET.session_timeout_ms,
            max_bytes_between_snapshots=1,  # every node snapshots as soon as it can
        )
        dirs = {i: tmp_path / f"c{i}" for i in voters}
        for d in dirs.values():
            d.mkdir()
        nodes = {i: Node(i, voters, dirs[i], config, bytes([i]) * 16) for i in voters}
        for n in nodes.values():
            await n.start()
        try:
            first = await wait_for(lambda: active(nodes.values()), 10, "an active controller")
            assert first.loader.image.scram_credential("admin", "SCRAM-SHA-512") is None
            epoch = await first.controller.register_broker(
                BrokerRegistrationRequest(101, bytes(16), [Endpoint("PLAINTEXT", "h", 1)])
            )
            # The registration's epoch is still its own record's offset, with the
            # bootstrap record ahead of it in the batch.
            assert first.loader.image.cluster.brokers[101].epoch == epoch
            assert _salt(first) == first.salt
            await wait_for(
                lambda: all(_salt(n) == first.salt for n in nodes.values()),
                10,
                "every controller to hold the first active controller's admin",
            )

            await first.controller.maybe_snapshot()  # the periodic task sleeps
            assert first.driver.snapshots.latest() is not None
            await first.stop(graceful=True)
            rest = [n for n in nodes.values() if n is not first]
            second = await wait_for(lambda: active(rest), 10, "a new active controller")
            await second.controller.create_topics([NewTopic("after", 1, 1)])
            assert _salt(second) == first.salt

            # The old controller restarts from its snapshot plus the log's tail.
            old = first.driver.node_id
            nodes[old] = Node(old, voters, dirs[old], config, bytes([old]) * 16)
            await nodes[old].start()
            await wait_for(
                lambda: nodes[old].loader.image.offset >= second.loader.image.offset,
                10,
                "the restarted controller to catch up",
            )
            assert _salt(nodes[old]) == first.salt
            for n in rest:
                assert n.scram_replays == 1, f"controller {n.driver.node_id} replayed twice"
        finally:
            for n in nodes.values():
                if n.driver._task is not None and not n.driver._task.done():
                    await n.stop(graceful=False)

    asyncio.run(scenario())


def test_an_idle_active_controller_writes_its_bootstrap_records(tmp_path):
    async def scenario() -> None:
        voters = {1: f"127.0.0.1:{free_ports(1)[0]}"}
        tmp_path.joinpath("c1").mkdir()
        config = ControllerConfig(heartbeat_interval_ms=200, session_timeout_ms=1500)
        node = Node(1, voters, tmp_path / "c1", config, b"s" * 16)
        await node.start()
        try:
            await wait_for(lambda: _salt(node) == node.salt, 10, "the admin credential")
            await asyncio.sleep(0.5)  # several periodic turns later, still once
            assert node.scram_replays == 1
        finally:
            await node.stop(graceful=False)

    asyncio.run(scenario())


def test_a_corrupt_bootstrap_checkpoint_is_refused(tmp_path):
    bootstrap_checkpoint.write(str(tmp_path), [])
    assert bootstrap_checkpoint.read(str(tmp_path)) == []
    path = tmp_path / bootstrap_checkpoint.FILE_NAME
    path.write_bytes(path.read_bytes()[:-3])
    try:
        bootstrap_checkpoint.read(str(tmp_path))
    except bootstrap_checkpoint.BootstrapError as error:
        assert error.error_name == "CORRUPT_MESSAGE" and "is corrupt" in str(error)
    else:
        raise AssertionError("a file cut short was read")
    assert bootstrap_checkpoint.read(str(tmp_path / "none")) == []
