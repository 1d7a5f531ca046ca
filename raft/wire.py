"""Raft messages to and from their protobuf form (strom_api/v1/raft.proto).

Pure conversion: the one place that knows both the core's dataclasses and the wire's
messages. Error names map to Kafka's codes in strom_api.v1.ErrorCode. Decoding is the edge:
a message with a field out of range (raft/wire_checks.py) or an unknown error code raises
MalformedRaftMessageError, and the transport drops it.
"""

from __future__ import annotations

from raft import messages as m
from raft.wire_checks import MalformedRaftMessageError, check_message
from strom_api.v1 import common_pb2, raft_pb2


def _name(code: int) -> str:
    try:
        return common_pb2.ErrorCode.Name(code)
    except ValueError:  # proto3 enums are open: any int32 arrives
        raise MalformedRaftMessageError(f"unknown error code {code}") from None


def _entries_to_proto(entries: tuple[m.Entry, ...]) -> list[raft_pb2.RaftEntry]:
    return [
        raft_pb2.RaftEntry(
            offset=e.offset, epoch=e.epoch, data=e.data, control=e.control, more=e.more
        )
        for e in entries
    ]


def _snapshot_to_proto(snapshot_id: m.SnapshotId) -> raft_pb2.RaftSnapshotId:
    return raft_pb2.RaftSnapshotId(end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch)


def _snapshot_from_proto(pb: raft_pb2.RaftSnapshotId) -> m.SnapshotId:
    return m.SnapshotId(pb.end_offset, pb.epoch)


def to_proto(message: m.Message) -> raft_pb2.RaftMessage:
    out = raft_pb2.RaftMessage(src=message.src, dst=message.dst)
    if isinstance(message, m.VoteRequest):
        out.vote_request.CopyFrom(
            raft_pb2.RaftVoteRequest(
                epoch=message.epoch,
                last_epoch=message.last_epoch,
                end_offset=message.end_offset,
                pre_vote=message.pre_vote,
            )
        )
    elif isinstance(message, m.VoteResponse):
        out.vote_response.CopyFrom(
            raft_pb2.RaftVoteResponse(
                epoch=message.epoch,
                leader_id=message.leader_id,
                granted=message.granted,
                pre_vote=message.pre_vote,
                error=message.error,
                candidate_epoch=message.candidate_epoch,
            )
        )
    elif isinstance(message, m.BeginQuorumEpochRequest):
        out.begin_quorum_epoch_request.epoch = message.epoch
    elif isinstance(message, m.BeginQuorumEpochResponse):
        out.begin_quorum_epoch_response.CopyFrom(
            raft_pb2.RaftBeginQuorumEpochResponse(
                epoch=message.epoch, leader_id=message.leader_id, error=message.error
            )
        )
    elif isinstance(message, m.EndQuorumEpochRequest):
        out.end_quorum_epoch_request.CopyFrom(
            raft_pb2.RaftEndQuorumEpochRequest(
                epoch=message.epoch, preferred_successors=message.preferred_successors
            )
        )
    elif isinstance(message, m.EndQuorumEpochResponse):
        out.end_quorum_epoch_response.CopyFrom(
            raft_pb2.RaftEndQuorumEpochResponse(
                epoch=message.epoch, leader_id=message.leader_id, error=message.error
            )
        )
    elif isinstance(message, m.FetchRequest):
        out.fetch_request.CopyFrom(
            raft_pb2.RaftFetchRequest(
                epoch=message.epoch,
                fetch_offset=message.fetch_offset,
                last_fetched_epoch=message.last_fetched_epoch,
                max_entries=message.max_entries,
                high_watermark=message.high_watermark,
            )
        )
    elif isinstance(message, m.FetchResponse):
        response = raft_pb2.RaftFetchResponse(
            epoch=message.epoch,
            leader_id=message.leader_id,
            high_watermark=message.high_watermark,
            entries=_entries_to_proto(message.entries),
            error=message.error,
            fetch_offset=message.fetch_offset,
            last_fetched_epoch=message.last_fetched_epoch,
        )
        if message.diverging is not None:
            response.diverging.CopyFrom(
                raft_pb2.RaftDivergingEpoch(
                    epoch=message.diverging.epoch, end_offset=message.diverging.end_offset
                )
            )
        if message.snapshot_id is not None:
            response.snapshot_id.CopyFrom(_snapshot_to_proto(message.snapshot_id))
        out.fetch_response.CopyFrom(response)
    elif isinstance(message, m.FetchSnapshotRequest):
        out.fetch_snapshot_request.CopyFrom(
            raft_pb2.RaftFetchSnapshotRequest(
                epoch=message.epoch,
                snapshot_id=_snapshot_to_proto(message.snapshot_id),
                position=message.position,
                max_bytes=message.max_bytes,
            )
        )
    elif isinstance(message, m.FetchSnapshotResponse):
        chunk = raft_pb2.RaftFetchSnapshotResponse(
            epoch=message.epoch,
            leader_id=message.leader_id,
            position=message.position,
            size=message.size,
            data=message.data,
            error=message.error,
        )
        if message.snapshot_id is not None:
            chunk.snapshot_id.CopyFrom(_snapshot_to_proto(message.snapshot_id))
        out.fetch_snapshot_response.CopyFrom(chunk)
    else:
        raise TypeError(f"not a Raft message: {message!r}")
    return out


def from_proto(pb: raft_pb2.RaftMessage) -> m.Message:
    """The message `pb` carries; raises MalformedRaftMessageError if a field is out of range."""
    message = _decode(pb)
    check_message(message)
    return message


def _decode(pb: raft_pb2.RaftMessage) -> m.Message:
    kind = pb.WhichOneof("body")
    src, dst = pb.src, pb.dst
    if kind == "vote_request":
        v = pb.vote_request
        return m.VoteRequest(src, dst, v.epoch, v.last_epoch, v.end_offset, v.pre_vote)
    if kind == "vote_response":
        r = pb.vote_response
        return m.VoteResponse(
            src, dst, r.epoch, r.leader_id, r.granted, r.pre_vote, _name(r.error), r.candidate_epoch
        )
    if kind == "begin_quorum_epoch_request":
        return m.BeginQuorumEpochRequest(src, dst, pb.begin_quorum_epoch_request.epoch)
    if kind == "begin_quorum_epoch_response":
        b = pb.begin_quorum_epoch_response
        return m.BeginQuorumEpochResponse(src, dst, b.epoch, b.leader_id, _name(b.error))
    if kind == "end_quorum_epoch_request":
        e = pb.end_quorum_epoch_request
        return m.EndQuorumEpochRequest(src, dst, e.epoch, tuple(e.preferred_successors))
    if kind == "end_quorum_epoch_response":
        e2 = pb.end_quorum_epoch_response
        return m.EndQuorumEpochResponse(src, dst, e2.epoch, e2.leader_id, _name(e2.error))
    if kind == "fetch_request":
        f = pb.fetch_request
        return m.FetchRequest(
            src, dst, f.epoch, f.fetch_offset, f.last_fetched_epoch, f.max_entries, f.high_watermark
        )
    if kind == "fetch_response":
        r2 = pb.fetch_response
        diverging = None
        if r2.HasField("diverging"):
            diverging = m.DivergingEpoch(r2.diverging.epoch, r2.diverging.end_offset)
        entries = tuple(m.Entry(e.offset, e.epoch, e.data, e.control, e.more) for e in r2.entries)
        return m.FetchResponse(
            src,
            dst,
            r2.epoch,
            r2.leader_id,
            r2.high_watermark,
            entries,
            diverging,
            _name(r2.error),
            r2.fetch_offset,
            r2.last_fetched_epoch,
            _snapshot_from_proto(r2.snapshot_id) if r2.HasField("snapshot_id") else None,
        )
    if kind == "fetch_snapshot_request":
        q = pb.fetch_snapshot_request
        return m.FetchSnapshotRequest(
            src, dst, q.epoch, _snapshot_from_proto(q.snapshot_id), q.position, q.max_bytes
        )
    if kind == "fetch_snapshot_response":
        c = pb.fetch_snapshot_response
        return m.FetchSnapshotResponse(
            src,
            dst,
            c.epoch,
            c.leader_id,
            _snapshot_from_proto(c.snapshot_id) if c.HasField("snapshot_id") else None,
            c.position,
            c.size,
            c.data,
            _name(c.error),
        )
    raise MalformedRaftMessageError(f"Raft message from {src} carries no body")
