"""One Strom node: `strom server server.properties` (DESIGN.md §1).

A node runs the metadata log's Raft driver (as a voter when it has the controller role,
else as an observer) with a MetadataLoader keeping its image. With the controller role it
also runs a QuorumController and serves ControllerService beside RaftService on its
CONTROLLER listener. With the broker role it registers and heartbeats
(broker/lifecycle_client.py) and acts on each metadata delta: it creates the local log of
every partition it replicates and deletes those of deleted topics (the data path that
fills them is the next layer). Stopping a broker first moves its leaderships away
(controlled shutdown); a leading controller hands leadership to the most caught-up voter.
"""

from __future__ import annotations

import asyncio
import logging
import os

from broker.controller_service import ControllerServicer
from broker.lifecycle_client import LifecycleClient
from broker.server_config import ServerConfig
from metadata.controller import QuorumController
from metadata.delta import MetadataDelta
from metadata.image import Endpoint, MetadataImage
from metadata.loader import MetadataLoader
from raft.driver import RaftDriver
from storage import meta_properties
from storage.log_manager import LogManager
from strom_api.v1 import controller_pb2_grpc

log = logging.getLogger("strom.node")
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0


class Node:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.loader = MetadataLoader()
        self.controller: QuorumController | None = None
        self.lifecycle: LifecycleClient | None = None
        self.log_manager: LogManager | None = None
        self.cluster_id = ""
        self._local_changes: asyncio.Queue[MetadataDelta] = asyncio.Queue()
        self._local_changes_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        config = self.config
        directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        self.cluster_id = meta_properties.check_dirs(directories, config.node_id)
        if config.is_controller:
            listen = config.listeners[config.controller_listener].address
        else:
            listen = config.broker_listeners[0].address
        self.driver = RaftDriver(
            config.node_id,
            config.voters,
            listen,
            config.metadata_log_dir,
            self.loader,
            config.raft,
            add_services=self._add_services if config.is_controller else None,
        )
        if config.is_controller:
            self.controller = QuorumController(self.driver, self.loader, config.controller)
        if config.is_broker:
            self.log_manager = LogManager(list(config.log_dirs))
            await asyncio.to_thread(self.log_manager.startup)
            self.loader.publishers.append(self._queue_local_changes)
            self._local_changes_task = asyncio.create_task(self._apply_local_changes())
        await self.driver.start()
        if self.controller is not None:
            self.controller.start()
        if config.is_broker:
            self.lifecycle = LifecycleClient(
                config.node_id,
                self.cluster_id,
                config.voters,
                [Endpoint(x.name, x.host, x.port) for x in config.broker_listeners],
                config.rack,
                lambda: self.loader.image.offset,
                config.controller.heartbeat_interval_ms,
            )
            self.lifecycle.start()
        for key in config.unknown:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)

    def _add_services(self, server: object) -> None:
        assert self.controller is not None
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(  # type: ignore[no-untyped-call]
            ControllerServicer(
                self.controller, self.cluster_id, self.config.properties, self.config.node_id
            ),
            server,
        )

    async def stop(self) -> None:
        if self.lifecycle is not None:
            done = await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
            if not done:
                log.warning("controlled shutdown did not complete: %s", self.lifecycle.last_error)
            await self.lifecycle.stop()
        if self.controller is not None:
            await self.controller.stop()
        await self.driver.stop(graceful=True)
        if self.log_manager is not None:
            await self._local_changes.join()
            if self._local_changes_task is not None:
                self._local_changes_task.cancel()
            await asyncio.to_thread(self.log_manager.shutdown)

    # --- the broker acting on metadata -------------------------------------------------------

    def _queue_local_changes(self, delta: MetadataDelta, image: MetadataImage) -> None:
        # Creating a log is disk work (directories, files, fsyncs): done off the loop, in
        # log order, so a combined node's Raft and controller never wait for it.
        self._local_changes.put_nowait(delta)

    async def _apply_local_changes(self) -> None:
        while True:
            delta = await self._local_changes.get()
            try:
                await asyncio.to_thread(self._apply_to_local_logs, delta)
            except Exception:
                log.exception("could not apply a metadata change to the local logs")
            finally:
                self._local_changes.task_done()

    def _apply_to_local_logs(self, delta: MetadataDelta) -> None:
        manager = self.log_manager
        assert manager is not None
        me = self.config.node_id
        for topic in delta.topics.deleted.values():
            for partition in topic.partitions:
                manager.delete_log(topic.name, partition)
        for change in delta.topics.changed.values():
            for partition, registration in change.partitions.items():
                if me in registration.replicas:
                    manager.get_or_create_log(change.name, partition)
                elif manager.get_log(change.name, partition) is not None:
                    manager.delete_log(change.name, partition)  # reassigned away

    def describe(self) -> str:
        return (
            f"node {self.config.node_id} ({','.join(sorted(self.config.roles))}) in cluster "
            f"{self.cluster_id}, metadata in {os.path.abspath(self.config.metadata_log_dir)}"
        )
