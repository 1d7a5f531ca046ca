"""One Strom node: `strom server server.properties` (docs/architecture.md §1).

A node runs the metadata log's Raft driver (as a voter when it has the controller role,
else as an observer) with a MetadataLoader keeping its image. With the controller role it
also runs a QuorumController and serves ControllerService beside RaftService on its
CONTROLLER listener. With the broker role it registers and heartbeats
(broker/lifecycle_client.py) with its advertised listeners, serves ClientService and
ReplicaService on each of its broker listeners (server/listeners.py), and acts on each
metadata delta, in log order: partitions deleted or moved away stop being served, their
logs are deleted and new replicas' logs created (disk work, off the loop), then every
touched replica takes the role the new image gives it and the replica fetchers follow the
new leaders (broker/replica_manager.py, replica_fetcher.py).
Stopping a broker first moves its leaderships away (controlled shutdown); a leading
controller hands leadership to the most caught-up voter.

A log directory that fails (its first OSError, storage.log_dir_failures) stops serving its
partitions at once (KAFKA_STORAGE_ERROR, fetchers dropped, readiness NOT_SERVING), and the
heartbeats name them so the controller moves their leadership and ISR membership to other
brokers (Kafka's offline log dirs, KIP-858). When no log directory is left online the
broker halts, as Kafka's does ("Shutdown broker because
all log dirs in ... have failed"): no controlled shutdown, whose leader handoff would ask
this broker's broken disk for nothing; the controller fences it when its heartbeats stop and
elects leaders among the other replicas of the ISR.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from broker.channel_options import MAX_MESSAGE_BYTES
from broker.group_partitions import BrokerCoordinatorPartitions
from broker.lifecycle_client import LifecycleClient
from broker.log_maintenance import LogMaintenance
from broker.metadata_gate import CAUGHT_UP_POLL_S, ApplyBatch, MetadataGate
from broker.partition import Partition
from broker.producer_ids import ProducerIdManager
from broker.replica_fetcher import FetcherManager
from broker.replica_manager import ReplicaManager
from coordinator.group.core import OFFSETS_TOPIC
from coordinator.group.runtime import GroupCoordinator
from metadata.controller import QuorumController
from metadata.delta import MetadataDelta
from metadata.image import Endpoint, MetadataImage
from metadata.loader import MetadataLoader
from raft.driver import RaftDriver
from raft.transport import EXCLUSIVE_PORT, BindError, bind
from server import bootstrap_checkpoint
from server.admission import (
    AnonymousAdmission,
    CaughtUpAdmission,
    CertificateAdmission,
    SaslAdmission,
)
from server.client_service import ClientServicer, auto_create
from server.controller_authorization import authorizing
from server.controller_forwarder import authorized_forwarding, forwarding_servicer
from server.controller_service import ControllerServicer
from server.health import NodeHealth
from server.listeners import Listener
from server.metrics import NodeMetrics
from server.metrics_listener import MetricsListener
from server.node_authorizer import NodeAuthorizer
from server.node_status import NodeStatus
from server.offsets_topic_creator import OffsetsTopicCreator
from server.replica_service import ReplicaServicer
from server.replica_service import add_to_server as add_replica_service
from server.request_authorization import RequestAuthorizer
from server.request_session import Admission, enter, leave
from server.rpc_guard import guarded, quiet_grpc_server_log
from server.sasl_exchange import AuthenticationCounts, SaslListener
from server.sasl_service import SaslServicer
from server.sasl_sessions import SessionSigner
from server.server_config import ServerConfig
from server.unapplied_configs import not_applied_warning
from storage import meta_properties
from storage.errors import LogDirError, StorageError
from storage.log_manager import LogManager
from strom_api.scram_credential import ScramCredential
from strom_api.tls import ServerTls, aio_channel
from strom_api.v1 import client_pb2_grpc, controller_pb2_grpc, security_pb2_grpc

if TYPE_CHECKING:
    from server.kafka.listener import KafkaListener

log = logging.getLogger("strom.node")


CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
# After a fatal fault (the Raft task died, every log dir failed), how long liveness answers
# NOT_SERVING before the process ends.
FATAL_EXIT_DELAY_S = 1.0
HALT_EXIT_CODE = 1


def advertised_host(host: str) -> str:
    """An advertised listener's host; for an empty one (every interface) the machine's
    canonical host name, as Kafka advertises it."""
    return host or socket.getfqdn()


def advertised_endpoints(config: ServerConfig) -> list[Endpoint]:
    """What the broker registers: its advertised listeners (server/listeners.py)."""
    return [
        Endpoint(x.name, advertised_host(x.host), x.port, config.protocols.get(x.name, "PLAINTEXT"))
        for x in config.advertised_listeners
    ]


def halt_process(code: int) -> None:
    """Kafka's Exit.halt: end the process now, without shutdown hooks (log lines written)."""
    logging.shutdown()
    os._exit(code)


class Node:
    def __init__(self, config: ServerConfig, halt: Callable[[int], None] = halt_process) -> None:
        self.config = config
        self.halt = halt
        self.loader = MetadataLoader()
        self.controller: QuorumController | None = None
        self.lifecycle: LifecycleClient | None = None
        self.log_manager: LogManager | None = None
        self.cluster_id = ""
        self.replicas: ReplicaManager | None = None
        self.fetchers: FetcherManager | None = None
        self.maintenance: LogMaintenance | None = None
        self.groups: GroupCoordinator | None = None
        self._create_offsets_topic = OffsetsTopicCreator(self._ask_for_offsets_topic)
        self.broker_servers: list[grpc.aio.Server] = []  # one per broker listener
        self.broker_ports: dict[str, int] = {}  # listener name -> bound port
        self.kafka_listeners: list[KafkaListener] = []  # kafka.listener.names (server/kafka/)
        # Which metadata deltas reach the local replicas, and when the broker listeners admit
        # calls (server/admission.CaughtUpAdmission): broker/metadata_gate.py decides, the
        # task of _apply_local_changes pumps it.
        self.gate = MetadataGate()
        self._deltas_loaded = asyncio.Event()  # set when the loader published a delta
        self._gate_idle = asyncio.Event()  # nothing queued, nothing being applied
        self._local_changes_task: asyncio.Task[None] | None = None
        self._disk_lock = asyncio.Lock()  # one thread at a time touches the LogManager
        self._background: list[asyncio.Task[None]] = []
        self.metrics: NodeMetrics | None = None
        self.metrics_listener: MetricsListener | None = None
        self.metrics_port = 0
        self.health = NodeHealth(self.status)  # on every listener
        self.tls: dict[str, ServerTls] = {}  # SSL listener name -> its keys and truststore
        # SASL listeners' session tokens (server/sasl_sessions.py) and authentication counts.
        self.sessions = SessionSigner(lambda: int(time.time() * 1000))
        self.authentications = AuthenticationCounts()
        # authorizer.class.name: one authorizer per image's ACLs, asked by every servicer
        self.authorizer = NodeAuthorizer(config.authorizer)
        self.authz = RequestAuthorizer(self.authorizer.current)
        self.loader.publishers.append(lambda delta, image: self.authorizer.on_image(image))

    def status(self) -> NodeStatus:
        """The readiness facts as they stand now, for the health service (server/health.py)."""
        driver = getattr(self, "driver", None)  # set by start()
        core = driver.core if driver is not None else None
        manager, lifecycle = self.log_manager, self.lifecycle
        return NodeStatus(
            controller_role=self.config.is_controller,
            broker_role=self.config.is_broker,
            raft_leader_known=core is not None and core.leader_id >= 0,
            log_dirs_online=manager is not None and not manager.offline_dir_count(),
            caught_up=lifecycle is not None and lifecycle.caught_up,
            unfenced=lifecycle is not None and not lifecycle.fenced,
        )

    async def start(self) -> None:
        config = self.config
        quiet_grpc_server_log()
        if config.metrics_port >= 0:  # first: a port in use stops the node before it joins
            self.metrics_listener = MetricsListener(config.metrics_host, config.metrics_port)
        try:
            await self._start()
        except BaseException:
            if self.metrics_listener is not None:
                self.metrics_listener.close()
            raise

    async def _start(self) -> None:
        config = self.config
        # The PEM files are read first: a bad key or password stops the node with one line
        # before it binds or joins anything.
        self.tls = {name: tls.load(self._tls_reload_failed) for name, tls in config.tls.items()}
        directories = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        self.cluster_id = meta_properties.check_dirs(directories, config.node_id)
        listen = (
            config.listeners[config.controller_listener].address if config.is_controller else None
        )
        self.driver = RaftDriver(
            config.node_id,
            config.voters,
            listen,
            config.metadata_log_dir,
            self.loader,
            config.raft,
            add_services=self._add_services if config.is_controller else None,
            server_credentials=self._credentials(config.controller_listener),
            open_channel=self._dialer(config.controller_listener),
            tls=config.controller_listener in self.tls,
            admit_stream=self._admit_raft_stream,
            server_options=self._message_limits(),
        )
        if config.is_controller:
            self.controller = QuorumController(
                self.driver,
                self.loader,
                config.controller,
                node_id=config.node_id,
                static_config=config.properties,
                bootstrap_records=bootstrap_checkpoint.read(config.metadata_log_dir),
            )
        if config.is_broker:
            await self._start_broker()
        try:
            await self.driver.start()
        except BaseException:  # e.g. a quorum-state it refuses: end with the one line only
            for server in self.broker_servers:
                await server.stop(0)
            for kafka in self.kafka_listeners:
                await kafka.stop()
            raise
        self.driver.add_failure_callback(self._raft_failed)
        await self.health.start()
        if self.controller is not None:
            self.controller.start()
        if self.lifecycle is not None:
            self.lifecycle.start()
        if self.metrics_listener is not None:
            self.metrics = NodeMetrics(self)
            self.metrics_listener.serve(self.metrics.registry)
            self.metrics_port = self.metrics_listener.port
        for key in config.unknown:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        for key in config.not_applied:
            log.warning(not_applied_warning(key))

    async def _start_broker(self) -> None:
        config = self.config
        self.log_manager = LogManager(list(config.log_dirs))
        await asyncio.to_thread(self.log_manager.startup)
        if not self.log_manager.online_dirs():
            failed = self.log_manager.failures.offline_dirs
            raise LogDirError(
                "Shutdown broker because none of the log dirs could be loaded: "
                + "; ".join(f"{d} ({why})" for d, why in failed.items())
            )
        loop = asyncio.get_running_loop()

        def log_dir_failed(log_dir: str, why: str) -> None:  # on any thread
            loop.call_soon_threadsafe(self._log_dir_failed, log_dir, why)

        self.log_manager.failures.listeners.append(log_dir_failed)
        self.lifecycle = LifecycleClient(
            config.node_id,
            self.cluster_id,
            config.voters,
            advertised_endpoints(config),
            config.rack,
            lambda: self.loader.image.offset,
            config.controller.heartbeat_interval_ms,
            previous_broker_epoch=self.log_manager.previous_broker_epoch,
            open_channel=self._dialer(config.controller_listener),
            tls=config.controller_listener in self.tls,
        )
        lifecycle = self.lifecycle

        def broker_epoch() -> int:
            return lifecycle.broker_epoch

        self.replicas = ReplicaManager(
            config.node_id,
            self.log_manager,
            config.replica,
            dict(config.properties),
            lifecycle.call_controller,
            broker_epoch,
        )
        self.fetchers = FetcherManager(
            config.node_id,
            config.replica,
            broker_epoch,
            self._inter_broker_address,
            self.replicas.replication,  # dynamic fetcher settings and the follower's quota
            self._dialer(config.replica.inter_broker_listener),
        )
        self.groups = GroupCoordinator(
            config.node_id, BrokerCoordinatorPartitions(self.replicas), config.groups
        )
        fetchers, groups = self.fetchers, self.groups

        def role_changed(partition: Partition) -> None:
            fetchers.follow(partition)
            groups.on_partition_role(partition)

        def removed(partition: Partition) -> None:
            fetchers.unfollow(partition)
            groups.on_partition_role(partition)

        self.replicas.on_role_change = role_changed
        self.replicas.on_removed = removed
        lifecycle.offline_replicas = self.replicas.offline_replicas
        self.groups.start()
        self.replicas.start()
        replicas = self.replicas
        self.maintenance = LogMaintenance(
            lambda: list(replicas.partitions.values()), config.replica
        )
        self.maintenance.start()
        self.loader.publishers.append(self._queue_local_changes)
        self._local_changes_task = asyncio.create_task(self._apply_local_changes())
        self._background.append(asyncio.create_task(self._checkpoint_periodically()))
        client_servicer = ClientServicer(
            self.replicas,
            ProducerIdManager(
                config.node_id,
                broker_epoch,
                lifecycle.call_controller,
                lambda: self.loader.image.producer_ids.next_producer_id,
            ),
            self.cluster_id,
            config.broker_listeners[0].name,
            lambda: self.loader.leader.leader_id,
            lambda names: auto_create(lifecycle.call_controller, names),
            config.replica.auto_create_topics,
            self._observe,
            self.groups,
            self._create_offsets_topic,
            self._checkpoint_now,
            self.authz,
        )
        replica_servicer = ReplicaServicer(self.replicas, self._observe, self.authz)
        # The broker checks its client before forwarding (the controller checks the broker).
        forwarder = authorizing(
            forwarding_servicer(lifecycle.forward), self.authz, on_controller=False
        )
        # Every listener serves every broker API, as Kafka's do; each has its own server
        # because a Metadata answer carries the endpoints of the listener it came in on.
        for listener in config.broker_listeners:
            if listener.name in config.kafka_listeners:
                await self._bind_kafka_listener(listener, client_servicer)
                continue
            server = self._broker_server()
            # every caller admitted, every request checked, before a servicer sees it
            admission = CaughtUpAdmission(self._admission(listener.name), self._is_serving)
            guarded_server = guarded(server, admission)
            client_pb2_grpc.add_ClientServiceServicer_to_server(  # type: ignore[no-untyped-call]
                client_servicer.for_listener(listener.name), guarded_server
            )
            add_replica_service(replica_servicer, guarded_server)
            controller_pb2_grpc.add_ControllerServiceServicer_to_server(  # type: ignore[no-untyped-call]
                forwarder, guarded_server
            )
            self._add_sasl(listener.name, server, admission)
            self.health.add_to(server)
            self.broker_servers.append(server)
            self.broker_ports[listener.name] = bind(
                server, listener.address, self._credentials(listener.name)
            )
        for server in self.broker_servers:
            await server.start()

    async def _bind_kafka_listener(self, listener: Listener, client: ClientServicer) -> None:
        """A listener of kafka.listener.names: Kafka's protocol (server/kafka/), bound now,
        serving once the broker serves (_start_serving). Imported here: kio is the `kafka`
        extra, which the config check asks for when a Kafka listener is configured."""
        from server.kafka.data_plane import DataPlane
        from server.kafka.handlers import KafkaApis
        from server.kafka.listener import KafkaListener, KafkaListenerTls

        assert self.replicas is not None and self.lifecycle is not None
        replicas = self.replicas
        # The gRPC servicer's collaborators: one producer-id manager, one authorizer.
        data_plane = DataPlane(replicas, client.producer_ids, client.authz, client.persist_offsets)
        apis = KafkaApis(
            listener.name,
            lambda: replicas.image,
            client.metadata_sources(),
            client.group_paths,
            data_plane,
            # the gRPC forwarder's path: the client authorized, then the active controller
            controller=authorized_forwarding(self.lifecycle.forward, self.authz),
            authz=self.authz,
            replicas=lambda: replicas,
        )
        tls = None
        if listener.name in self.tls:  # SSL: the listener's ssl.* material, as for gRPC's
            settings = self.config.tls[listener.name]
            context = self.tls[listener.name].ssl_context(
                request_client_cert=settings.client_auth == "requested"
            )
            tls = KafkaListenerTls(context, settings.certificate_principal)
        sasl_settings = self.config.sasl.get(listener.name)
        sasl = (
            None
            if sasl_settings is None
            else SaslListener(sasl_settings, self._scram_credential, self.authentications)
        )
        kafka = KafkaListener(
            listener,
            apis,
            self.config.replica.socket_request_max_bytes,
            self._observe_kafka,
            tls,
            sasl,
        )
        try:
            self.broker_ports[listener.name] = await kafka.bind()
        except OSError as exc:
            raise BindError(
                f"Socket server failed to bind to {listener.address}: address already in use "
                f"or not available ({exc.strerror})"
            ) from None
        self.kafka_listeners.append(kafka)

    def _message_limits(self) -> list[tuple[str, Any]]:
        """Every listener's (the controller's too: a broker forwards its clients' admin
        requests there, KIP-590): socket.request.max.bytes, a larger request refused by
        gRPC as it arrives; answers up to 128 MiB."""
        return [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", self.config.replica.socket_request_max_bytes),
        ]

    def _broker_server(self) -> grpc.aio.Server:
        replica = self.config.replica
        return grpc.aio.server(
            options=[EXCLUSIVE_PORT, *self._message_limits()],
            # queued.max.requests: further calls are refused (RESOURCE_EXHAUSTED), not
            # queued; per listener (Kafka's request queue is shared by its listeners).
            maximum_concurrent_rpcs=replica.queued_max_requests,
        )

    # --- TLS (server/listener_security.py) ---------------------------------------------------

    def _admission(self, listener: str) -> Admission:
        """How the callers of `listener` are named (server/admission.py)."""
        protocol = self.config.protocols.get(listener, "PLAINTEXT")
        if protocol.startswith("SASL_"):
            return SaslAdmission(listener, protocol, self.sessions)
        if protocol == "SSL":
            return CertificateAdmission(listener, self.config.tls[listener])
        return AnonymousAdmission(listener)

    def _is_serving(self) -> bool:
        return self.gate.serving

    def _start_serving(self) -> None:
        """The gate lets the broker listeners admit calls; then the broker asks to be
        unfenced (Kafka's BrokerServer enables request processing, then setReadyToUnfence)."""
        for kafka in self.kafka_listeners:
            self._background.append(asyncio.create_task(kafka.start_serving()))
        if self.lifecycle is not None:
            self.lifecycle.ready_to_unfence = True

    def _add_sasl(self, listener: str, server: Any, admission: Admission | None = None) -> None:
        """SecurityService on a SASL listener: the handshake its clients start with
        (admitted by `admission`, default the listener's own)."""
        settings = self.config.sasl.get(listener)
        if settings is None:
            return
        security_pb2_grpc.add_SecurityServiceServicer_to_server(  # type: ignore[no-untyped-call]
            SaslServicer(settings, self.sessions, self._scram_credential, self.authentications),
            guarded(server, admission or self._admission(listener)),
        )

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.loader.image.scram_credential(user, mechanism)

    def _credentials(self, listener: str) -> grpc.ServerCredentials | None:
        """The server credentials of an SSL listener (read again when its PEM files
        change), None for a PLAINTEXT one."""
        tls = self.tls.get(listener)
        return None if tls is None else tls.credentials()

    def _dialer(self, listener: str) -> Callable[..., grpc.aio.Channel]:
        """How this node opens a channel to the listener of that name on another node: TLS
        when it is SSL, trusting the listener's truststore, presenting its keystore
        certificate (mTLS), the target host checked against the peer's certificate
        (ssl.endpoint.identification.algorithm); logging in with SASL when it is SASL_*
        (server/listener_sasl.py)."""
        tls = self.tls.get(listener)
        settings = self.config.tls.get(listener)
        sasl = self.config.sasl.get(listener)
        login = None if sasl is None else sasl.login

        def open_channel(target: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
            client = (
                None if tls is None or settings is None else tls.client(settings.check_hostname)
            )
            return aio_channel(target, client, options, sasl=login)

        return open_channel

    def _tls_reload_failed(self, why: str) -> None:
        log.error("Failed to reload the SSL keystore or truststore, the old ones stay: %s", why)

    def _raft_failed(self, error: BaseException) -> None:
        """The Raft task died (a bug, or a metadata disk that failed a write): this node can
        no longer vote, lead or learn metadata. As Kafka's ProcessTerminatingFaultHandler:
        one line naming the error, then the process ends (exit code 1) for its supervisor to
        restart it; what it acknowledged is durable. Liveness answers NOT_SERVING meanwhile."""
        log.error(
            "Encountered fatal fault: the Raft task failed: %s: %s", type(error).__name__, error
        )
        self._background.append(asyncio.create_task(self._halt()))

    async def _halt(self) -> None:
        """The one way a fatal fault ends the node: health NOT_SERVING, then Exit.halt."""
        try:
            await self.health.fail()
            await asyncio.sleep(FATAL_EXIT_DELAY_S)  # a probe or Watch in flight sees it
        finally:
            self.halt(HALT_EXIT_CODE)

    async def _ask_for_offsets_topic(self) -> bool:
        """One CreateTopics of __consumer_offsets (OffsetsTopicCreator shares it): whether
        the topic exists after it."""
        assert self.lifecycle is not None
        groups = self.config.groups
        created = await auto_create(
            self.lifecycle.call_controller,
            [OFFSETS_TOPIC],
            groups.offsets_topic_partitions,
            groups.offsets_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(groups.offsets_topic_segment_bytes),
                "compression.type": "producer",
            },
        )
        return OFFSETS_TOPIC in created

    def _observe(self, api: str, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.observe(api, seconds)

    def _observe_kafka(self, request: str, version: int, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_kafka(request, version, seconds)

    def _inter_broker_address(self, broker_id: int) -> str | None:
        """host:port a broker advertises for the inter-broker listener
        (inter.broker.listener.name, else the first advertised broker listener)."""
        name = self.config.replica.inter_broker_listener
        broker = self.loader.image.cluster.brokers.get(broker_id)
        if broker is None:
            return None
        endpoint = next((e for e in broker.endpoints if e.name == name), None)
        return None if endpoint is None else f"{endpoint.host}:{endpoint.port}"

    async def _checkpoint_periodically(self) -> None:
        """replica.high.watermark.checkpoint.interval.ms: the high watermarks, recovery
        points and log starts of every log, written to each log directory's checkpoints."""
        interval = self.config.replica.checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._checkpoint_now()
            except StorageError as exc:  # its log directory is offline now
                log.error("could not write the offset checkpoints: %s", exc)

    async def _checkpoint_now(self) -> None:
        assert self.log_manager is not None
        async with self._disk_lock:
            await asyncio.to_thread(self.log_manager.checkpoint)

    def _add_services(self, server: object) -> None:
        assert self.controller is not None
        self.health.add_to(server)
        self._add_sasl(self.config.controller_listener, server)
        servicer = ControllerServicer(
            self.controller, self.cluster_id, self.config.properties, self.config.node_id
        )
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(  # type: ignore[no-untyped-call]
            authorizing(servicer, self.authz, on_controller=True),
            guarded(server, self._admission(self.config.controller_listener)),
        )

    async def _admit_raft_stream(self, context: Any) -> str | None:
        """RaftService.Exchange is for the controllers and the nodes observing them: a
        caller without CLUSTER_ACTION is refused (the sentence why), before any message."""
        session = await self._admission(self.config.controller_listener).admit(
            "/strom_api.v1.RaftService/Exchange", context
        )
        token = enter(session)
        try:
            error = self.authz.cluster("RaftExchange")
        finally:
            leave(token)
        return None if error is None else f"{error.error_name}: {error.message}"

    async def stop(self) -> None:
        await self.health.stop()
        if self.metrics_listener is not None:
            self.metrics_listener.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.lifecycle is not None:
            done = await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
            if not done:
                log.warning("controlled shutdown did not complete: %s", self.lifecycle.last_error)
            await self.lifecycle.stop()
        if self.controller is not None:
            await self.controller.stop()
        await asyncio.gather(*(server.stop(0.5) for server in self.broker_servers))
        await asyncio.gather(*(kafka.stop() for kafka in self.kafka_listeners))
        for task in self._background:
            task.cancel()
        if self.maintenance is not None:
            await self.maintenance.stop()
        if self.groups is not None:
            await self.groups.stop()
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.replicas is not None:
            await self.replicas.stop()
        await self.driver.stop(graceful=True)
        if self.log_manager is not None:
            if self.gate.caught_up:  # finish the disk work under way; else nothing was applied
                await self._gate_idle.wait()
            if self._local_changes_task is not None:
                self._local_changes_task.cancel()
            async with self._disk_lock:
                await asyncio.to_thread(self._shutdown_logs)

    def _shutdown_logs(self) -> None:
        assert self.log_manager is not None
        if self.replicas is not None:
            for partition in list(self.replicas.partitions.values()):
                if partition.offline:
                    continue  # recovery replays its log at the next start
                try:
                    partition.snapshot_producers()
                except StorageError as exc:
                    log.error("could not snapshot the producers of %s: %s", partition.name, exc)
        # The marker names the registration this data was kept under (KIP-966); a broker
        # that never registered this time keeps the one it started with.
        epoch = self.lifecycle.broker_epoch if self.lifecycle is not None else -1
        self.log_manager.shutdown(epoch if epoch >= 0 else self.log_manager.previous_broker_epoch)

    # --- log directory failures --------------------------------------------------------------

    def _log_dir_failed(self, log_dir: str, why: str) -> None:
        """On the loop, once per failed directory (Kafka's handleLogDirFailure)."""
        manager, replicas = self.log_manager, self.replicas
        assert manager is not None
        stopped = replicas.stop_serving_dir(log_dir) if replicas is not None else []
        log.error(
            "Stopped serving replicas in dir %s (%s): %d partition(s) now offline",
            log_dir,
            why,
            len(stopped),
        )
        if not manager.online_dirs():
            log.critical(
                "Shutdown broker because all log dirs in %s have failed",
                ", ".join(manager.log_dirs),
            )
            self._background.append(asyncio.create_task(self._halt()))

    # --- the broker acting on metadata -------------------------------------------------------

    def _queue_local_changes(self, delta: MetadataDelta, image: MetadataImage) -> None:
        # Creating a log is disk work (directories, files, fsyncs): done off the loop, in
        # log order, so a combined node's Raft and controller never wait for it.
        self.gate.delta_loaded(delta, image)
        self._gate_idle.clear()
        self._deltas_loaded.set()

    async def _apply_local_changes(self) -> None:
        """Pumps the metadata gate (broker/metadata_gate.py: nothing applied before the
        broker caught up with the metadata log, then the deltas queued meanwhile as one, then
        each as it is loaded; the listeners serve once the first batch is applied): tells it
        when the controller said the broker caught up (looking every CAUGHT_UP_POLL_S), and
        carries out its batches, the disk work in a worker thread."""
        gate, lifecycle = self.gate, self.lifecycle
        assert lifecycle is not None
        while not lifecycle.caught_up:
            await asyncio.sleep(CAUGHT_UP_POLL_S)
        gate.broker_caught_up()
        while True:
            step = gate.poll()
            if step.start_serving:
                self._start_serving()
            if step.batch is None:
                if gate.idle:
                    self._gate_idle.set()
                await self._deltas_loaded.wait()
                self._deltas_loaded.clear()
                continue
            try:
                await self._apply_batch(step.batch)
            except Exception:
                log.exception("could not apply a metadata change to the local replicas")
            finally:
                gate.batch_applied()

    async def _apply_batch(self, batch: ApplyBatch) -> None:
        """Every deletion of the batch stops being served, the logs it deletes and creates
        are deleted and created, then every replica its delta touches takes its role."""
        replicas = self.replicas
        assert replicas is not None
        doomed = [tp for delta in batch.detach for tp in replicas.detach(delta)]
        async with self._disk_lock:
            await asyncio.to_thread(self._apply_to_local_logs, batch.delta, batch.image, doomed)
        for _ in replicas.attach_in_steps(batch.delta, batch.image):
            await asyncio.sleep(0)  # Raft, heartbeats and requests between the steps

    def _apply_to_local_logs(
        self, delta: MetadataDelta, image: MetadataImage, doomed: list[tuple[str, int]]
    ) -> None:
        manager = self.log_manager
        replicas = self.replicas
        assert manager is not None and replicas is not None
        for topic, partition in doomed:
            manager.delete_log(topic, partition)
        replicas.create_logs(delta, image)

    def describe(self) -> str:
        return (
            f"node {self.config.node_id} ({','.join(sorted(self.config.roles))}) in cluster "
            f"{self.cluster_id}, metadata in {os.path.abspath(self.config.metadata_log_dir)}"
        )
