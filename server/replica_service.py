"""ReplicaService (proto/strom_api/v1/replica.proto), the leader's side of replication: each
ReplicaFetchRequest on a follower's stream is answered in order, after the long poll."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from broker.replica_manager import ReplicaManager
from broker.replica_wire import fetch_request_of
from server.api_errors import make_error
from server.request_authorization import RequestAuthorizer
from strom_api.v1 import replica_pb2, replica_pb2_grpc

Response = replica_pb2.ReplicaFetchResponse


class ReplicaServicer(replica_pb2_grpc.ReplicaServiceServicer):
    def __init__(
        self,
        replicas: ReplicaManager,
        observe: Callable[[str, float], None] = lambda api, seconds: None,
        authz: RequestAuthorizer | None = None,
    ) -> None:
        self.replicas = replicas
        self.observe = observe
        self.authz = authz or RequestAuthorizer()

    async def Fetch(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        # Only brokers follow (CLUSTER_ACTION, as Kafka's follower fetch): a client's
        # forged follower fetch would otherwise move the high watermark of acks=all writes.
        refusal = self.authz.cluster("ReplicaFetch")
        if refusal is not None:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, f"{refusal.error_name}: {refusal.message}"
            )
        async for request in request_iterator:
            start = time.perf_counter()
            response = await self.fetch_once(request)
            self.observe("ReplicaFetch", time.perf_counter() - start)
            yield response

    async def fetch_once(self, request: Any) -> Any:
        answer = await self.replicas.replica_fetch(fetch_request_of(request))
        response = Response(session_id=answer.session_id)
        if answer.error is not None:
            response.error.CopyFrom(make_error(answer.error, answer.message))
            return response
        for part in answer.partitions:
            out = response.partitions.add(
                topic_id=part.topic_id,
                partition=part.partition,
                high_watermark=part.high_watermark,
                log_start_offset=part.log_start_offset,
                log_end_offset=part.log_end_offset,
                records=part.records,
            )
            if part.error is not None:
                out.error.CopyFrom(make_error(part.error, part.message))
            if part.diverging is not None:
                out.diverging_epoch.epoch, out.diverging_epoch.end_offset = part.diverging
        return response
