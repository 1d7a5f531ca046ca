"""ReplicaService's messages both ways (proto/strom_api/v1/replica.proto): the follower's
fetcher (broker/replica_fetcher.py) sends the core's FetchRequest and reads a
ReplicaFetchResponse back; the leader's servicer (server/replica_service.py) reads a
ReplicaFetchRequest into the same FetchRequest. Protobuf stops here; the cores on either
side (broker/follower_fetch.py, broker/replica_manager.py) take the dataclasses."""

from __future__ import annotations

from typing import Any

from broker.follower_fetch import FetchRequest, FetchResponse, PartitionAnswer, PartitionFetch
from strom_api.v1 import common_pb2, replica_pb2

# The follower's hurry (FetchStream.take_hurry): answer the fetch in flight now.
HURRY = replica_pb2.ReplicaFetchRequest(hurry=True)


def request_pb(request: FetchRequest) -> Any:
    return replica_pb2.ReplicaFetchRequest(
        replica_id=request.replica_id,
        broker_epoch=request.broker_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        partitions=[
            replica_pb2.ReplicaFetchRequest.Partition(
                topic_id=p.topic_id,
                partition=p.partition,
                current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
                partition_max_bytes=p.partition_max_bytes,
            )
            for p in request.partitions
        ],
        session_id=request.session_id,
        session_epoch=request.session_epoch,
        forgotten=[
            replica_pb2.ReplicaFetchRequest.ForgottenPartition(topic_id=t, partition=i)
            for t, i in request.forgotten
        ],
    )


def _error_name(message: Any) -> str | None:
    if message.HasField("error") and message.error.code != 0:
        return str(common_pb2.ErrorCode.Name(message.error.code))
    return None


def response_of(response: Any) -> FetchResponse:
    """A ReplicaFetchResponse as the core takes it."""
    error = _error_name(response)
    if error is not None:
        return FetchResponse(error=error, message=response.error.message)
    return FetchResponse(
        session_id=response.session_id,
        partitions=tuple(
            PartitionAnswer(
                topic_id=item.topic_id,
                partition=item.partition,
                error=_error_name(item),
                records=item.records,
                high_watermark=item.high_watermark,
                log_start_offset=item.log_start_offset,
                log_end_offset=item.log_end_offset,
                diverging=(
                    (item.diverging_epoch.epoch, item.diverging_epoch.end_offset)
                    if item.HasField("diverging_epoch")
                    else None
                ),
            )
            for item in response.partitions
        ),
    )


def fetch_request_of(request: Any) -> FetchRequest:
    """A ReplicaFetchRequest as the replica manager takes it: protobuf stays at this edge.
    (correlation_id numbers a follower's own fetches and is not on the wire.)"""
    return FetchRequest(
        correlation_id=0,
        replica_id=request.replica_id,
        broker_epoch=request.broker_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        partitions=tuple(
            PartitionFetch(
                topic_id=p.topic_id,
                partition=p.partition,
                current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
                partition_max_bytes=p.partition_max_bytes,
            )
            for p in request.partitions
        ),
        session_id=request.session_id,
        session_epoch=request.session_epoch if request.HasField("session_epoch") else None,
        forgotten=tuple((f.topic_id, f.partition) for f in request.forgotten),
    )
