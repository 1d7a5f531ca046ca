"""ClientService's protobuf (proto/strom_api/v1/client.proto) as the front-end-neutral
requests of server/requests/ take them, and their answers back: the gRPC edge's whole
conversion, no rule. What protobuf cannot say is mapped here: an unset (0) field where
Kafka's request has a default or -1 for "none" (current_leader_epoch, max_bytes)."""

from __future__ import annotations

from typing import Any

from broker.fetch_sessions import FINAL_EPOCH, FetchState
from broker.loop_slices import LoopSlices
from metadata.errors import ApiError
from server.api_errors import error_pb, make_error
from server.loop_slices import per_group, per_partition
from server.request_items import named_items
from server.requests.delete_records import (
    DeletePartition,
    DeleteRecordsRequest,
    DeleteTopic,
    TopicLowWatermarks,
)
from server.requests.fetch_sessions_path import (
    SessionFetchAnswer,
    SessionFetchRequest,
    grouped,
    session_error_message,
)
from server.requests.leader_epochs import (
    EpochPartition,
    EpochTopic,
    OffsetsForLeaderEpochRequest,
    TopicEpochEndOffsets,
)
from server.requests.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    TopicOffsets,
)
from server.requests.log_dirs import LogDirDescription
from server.requests.partitions import LeaderHint
from server.requests.produce import (
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    TopicProduced,
)
from server.requests.producer_ids import InitProducerIdAnswer, InitProducerIdRequest
from strom_api.v1 import client_pb2

DEFAULT_FETCH_MAX_BYTES = 50 * 1024 * 1024  # fetch.max.bytes
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024  # max.partition.fetch.bytes


def leader_pb(leader: LeaderHint) -> client_pb2.LeaderIdAndEpoch:
    return client_pb2.LeaderIdAndEpoch(leader_id=leader.leader_id, leader_epoch=leader.leader_epoch)


# --- Produce ----------------------------------------------------------------------------------


async def produce_request(request: Any) -> ProduceRequest:
    # Each topic's name is read once: protobuf decodes a string field anew on every access.
    # In slices of partitions and of topics (100,000 topics of one partition each, too).
    topics = await per_group(
        ((topic.name, topic.partitions) for topic in request.topics),
        lambda _, p: ProducePartition(p.partition, p.records),
        ProduceTopic,
    )
    return ProduceRequest(request.acks, request.timeout_ms, topics)


async def produce_response(answer: list[TopicProduced]) -> client_pb2.ProduceResponse:
    response = client_pb2.ProduceResponse()
    slices = LoopSlices()
    for topic in answer:
        out = response.topics.add(name=topic.name)
        for p in topic.partitions:
            await slices.step()
            item = out.partitions.add(
                partition=p.partition,
                base_offset=p.base_offset,
                log_append_time_ms=p.log_append_time_ms,
                log_start_offset=p.log_start_offset,
            )
            if p.error is not None:
                item.error.CopyFrom(error_pb(p.error))
            if p.current_leader is not None:
                item.current_leader.CopyFrom(leader_pb(p.current_leader))
    return response


# --- Fetch ------------------------------------------------------------------------------------


async def fetch_request(request: Any) -> SessionFetchRequest:
    """An unset session_epoch is -1 (FINAL_EPOCH): a client that knows no sessions fetches
    sessionless and in full, as before KIP-227."""
    epoch = request.session_epoch if request.HasField("session_epoch") else FINAL_EPOCH
    asked = []
    slices = LoopSlices()
    for topic in request.topics:
        name = topic.name
        for p in topic.partitions:
            await slices.step()
            asked.append(
                (
                    (name, p.partition),
                    FetchState(
                        p.fetch_offset,
                        p.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
                        p.current_leader_epoch or -1,
                    ),
                )
            )
    return SessionFetchRequest(
        request.replica_id,
        request.max_wait_ms,
        request.min_bytes,
        request.max_bytes or DEFAULT_FETCH_MAX_BYTES,
        request.session_id,
        epoch,
        asked,
        list(named_items(request.forgotten_topics)),
    )


async def fetch_response(
    answer: SessionFetchAnswer, asked_session: int
) -> client_pb2.FetchResponse:
    """`asked_session`: the session id the request named (an error's sentence names it)."""
    response = client_pb2.FetchResponse(session_id=answer.session_id)
    if answer.error is not None:
        response.error.CopyFrom(
            make_error(answer.error.value, session_error_message(answer.error, asked_session))
        )
        return response
    slices = LoopSlices()
    for topic, partitions in grouped(answer.partitions):
        assert isinstance(topic, str)  # gRPC sessions name topics
        out = response.topics.add(name=topic)
        for p in partitions:
            await slices.step()
            item = out.partitions.add(
                partition=p.partition,
                high_watermark=p.high_watermark,
                last_stable_offset=p.last_stable_offset,
                log_start_offset=p.log_start_offset,
                records=p.records,
            )
            if p.error is not None:
                item.error.CopyFrom(error_pb(p.error))
            if p.current_leader is not None:
                item.current_leader.CopyFrom(leader_pb(p.current_leader))
    return response


# --- ListOffsets ------------------------------------------------------------------------------


async def list_offsets_request(request: Any) -> ListOffsetsRequest:
    def partition(_: str, p: Any) -> ListOffsetsPartition:
        return ListOffsetsPartition(p.partition, p.timestamp, p.current_leader_epoch or -1)

    topics = await per_partition(request.topics, partition)  # maybe 250,000 partitions
    return ListOffsetsRequest([ListOffsetsTopic(name, ps) for name, ps in topics])


async def list_offsets_response(answer: list[TopicOffsets]) -> client_pb2.ListOffsetsResponse:
    response = client_pb2.ListOffsetsResponse()
    slices = LoopSlices()
    for topic in answer:
        out = response.topics.add(name=topic.name)
        for p in topic.partitions:
            item = out.partitions.add(
                partition=p.partition,
                timestamp=p.timestamp,
                offset=p.offset,
                leader_epoch=p.leader_epoch,
            )
            if p.error is not None:
                item.error.CopyFrom(error_pb(p.error))
            if p.current_leader is not None:
                item.current_leader.CopyFrom(leader_pb(p.current_leader))
            await slices.step()
    return response


# --- OffsetsForLeaderEpoch --------------------------------------------------------------------


async def offsets_for_leader_epoch_request(request: Any) -> OffsetsForLeaderEpochRequest:
    def partition(_: str, p: Any) -> EpochPartition:
        return EpochPartition(p.partition, p.leader_epoch, p.current_leader_epoch or -1)

    topics = await per_partition(request.topics, partition)  # maybe 250,000 partitions
    return OffsetsForLeaderEpochRequest([EpochTopic(name, ps) for name, ps in topics])


async def offsets_for_leader_epoch_response(
    answer: list[TopicEpochEndOffsets],
) -> client_pb2.OffsetsForLeaderEpochResponse:
    response = client_pb2.OffsetsForLeaderEpochResponse()
    slices = LoopSlices()
    for topic in answer:
        out = response.topics.add(name=topic.name)
        for p in topic.partitions:
            item = out.partitions.add(
                partition=p.partition, leader_epoch=p.leader_epoch, end_offset=p.end_offset
            )
            if p.error is not None:
                item.error.CopyFrom(error_pb(p.error))
            await slices.step()
    return response


# --- InitProducerId ---------------------------------------------------------------------------


def init_producer_id_request(request: Any) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        request.transactional_id, request.producer_id, request.producer_epoch
    )


def init_producer_id_response(answer: InitProducerIdAnswer) -> client_pb2.InitProducerIdResponse:
    response = client_pb2.InitProducerIdResponse(
        producer_id=answer.producer_id, producer_epoch=answer.producer_epoch
    )
    if answer.error is not None:
        response.error.CopyFrom(error_pb(answer.error))
    return response


# --- DeleteRecords ----------------------------------------------------------------------------


async def delete_records_request(request: Any) -> DeleteRecordsRequest:
    """In slices (server/loop_slices.py): a request may name 250,000 partitions."""
    topics = await per_partition(
        request.topics, lambda _, p: DeletePartition(p.partition, p.offset)
    )
    return DeleteRecordsRequest([DeleteTopic(name, ps) for name, ps in topics])


async def delete_records_response(
    answer: list[TopicLowWatermarks],
) -> client_pb2.DeleteRecordsResponse:
    response = client_pb2.DeleteRecordsResponse()
    slices = LoopSlices()
    for topic in answer:
        out = response.topics.add(name=topic.name)
        for p in topic.partitions:
            item = out.partitions.add(partition=p.partition, low_watermark=p.low_watermark)
            if p.error is not None:
                item.error.CopyFrom(error_pb(p.error))
            await slices.step()
    return response


# --- DescribeLogDirs --------------------------------------------------------------------


async def log_dirs_wanted(request: Any) -> dict[str, list[int]] | None:
    """The replicas a DescribeLogDirs names (None: all), in slices of partitions."""
    if request.all_topics:
        return None
    wanted: dict[str, list[int]] = {}
    for name, partitions in await per_partition(request.topics, lambda _, p: int(p)):
        wanted.setdefault(name, []).extend(partitions)
    return wanted


async def log_dirs_response(
    refusal: ApiError | None, dirs: list[LogDirDescription]
) -> client_pb2.DescribeLogDirsResponse:
    response = client_pb2.DescribeLogDirsResponse()
    if refusal is not None:
        response.error.CopyFrom(error_pb(refusal))
        return response
    slices = LoopSlices()
    for d in dirs:
        out = response.log_dirs.add(
            log_dir=d.log_dir, total_bytes=d.total_bytes, usable_bytes=d.usable_bytes
        )
        if d.error is not None:
            out.error.CopyFrom(error_pb(d.error))
        for name, replicas in d.topics.items():
            topic = out.topics.add(name=name)
            for r in replicas:
                topic.replicas.add(partition=r.partition, size=r.size, offset_lag=r.offset_lag)
                await slices.step()
    return response
