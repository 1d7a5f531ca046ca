from strom_api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RaftEntry(_message.Message):
    __slots__ = ("offset", "epoch", "data", "control", "more")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    offset: int
    epoch: int
    data: bytes
    control: bool
    more: bool
    def __init__(self, offset: _Optional[int] = ..., epoch: _Optional[int] = ..., data: _Optional[bytes] = ..., control: _Optional[bool] = ..., more: _Optional[bool] = ...) -> None: ...

class RaftVoteRequest(_message.Message):
    __slots__ = ("epoch", "last_epoch", "end_offset", "pre_vote")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool
    def __init__(self, epoch: _Optional[int] = ..., last_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class RaftVoteResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "granted", "pre_vote", "error", "candidate_epoch")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool
    error: _common_pb2.ErrorCode
    candidate_epoch: int
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., granted: _Optional[bool] = ..., pre_vote: _Optional[bool] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., candidate_epoch: _Optional[int] = ...) -> None: ...

class RaftBeginQuorumEpochRequest(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class RaftBeginQuorumEpochResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "error")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    error: _common_pb2.ErrorCode
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class RaftEndQuorumEpochRequest(_message.Message):
    __slots__ = ("epoch", "preferred_successors")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, epoch: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ...) -> None: ...

class RaftEndQuorumEpochResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "error")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    error: _common_pb2.ErrorCode
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class RaftFetchRequest(_message.Message):
    __slots__ = ("epoch", "fetch_offset", "last_fetched_epoch", "max_entries", "high_watermark")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_entries: int
    high_watermark: int
    def __init__(self, epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., max_entries: _Optional[int] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class RaftDivergingEpoch(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class RaftSnapshotId(_message.Message):
    __slots__ = ("end_offset", "epoch")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    epoch: int
    def __init__(self, end_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class RaftFetchResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "high_watermark", "entries", "diverging", "error", "fetch_offset", "last_fetched_epoch", "snapshot_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    high_watermark: int
    entries: _containers.RepeatedCompositeFieldContainer[RaftEntry]
    diverging: RaftDivergingEpoch
    error: _common_pb2.ErrorCode
    fetch_offset: int
    last_fetched_epoch: int
    snapshot_id: RaftSnapshotId
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[RaftEntry, _Mapping]]] = ..., diverging: _Optional[_Union[RaftDivergingEpoch, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[RaftSnapshotId, _Mapping]] = ...) -> None: ...

class RaftFetchSnapshotRequest(_message.Message):
    __slots__ = ("epoch", "snapshot_id", "position", "max_bytes")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    snapshot_id: RaftSnapshotId
    position: int
    max_bytes: int
    def __init__(self, epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[RaftSnapshotId, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class RaftFetchSnapshotResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "snapshot_id", "position", "size", "data", "error")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    snapshot_id: RaftSnapshotId
    position: int
    size: int
    data: bytes
    error: _common_pb2.ErrorCode
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., snapshot_id: _Optional[_Union[RaftSnapshotId, _Mapping]] = ..., position: _Optional[int] = ..., size: _Optional[int] = ..., data: _Optional[bytes] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("src", "dst", "vote_request", "vote_response", "begin_quorum_epoch_request", "begin_quorum_epoch_response", "end_quorum_epoch_request", "end_quorum_epoch_response", "fetch_request", "fetch_response", "fetch_snapshot_request", "fetch_snapshot_response")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    END_QUORUM_EPOCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    END_QUORUM_EPOCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FETCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    src: int
    dst: int
    vote_request: RaftVoteRequest
    vote_response: RaftVoteResponse
    begin_quorum_epoch_request: RaftBeginQuorumEpochRequest
    begin_quorum_epoch_response: RaftBeginQuorumEpochResponse
    end_quorum_epoch_request: RaftEndQuorumEpochRequest
    end_quorum_epoch_response: RaftEndQuorumEpochResponse
    fetch_request: RaftFetchRequest
    fetch_response: RaftFetchResponse
    fetch_snapshot_request: RaftFetchSnapshotRequest
    fetch_snapshot_response: RaftFetchSnapshotResponse
    def __init__(self, src: _Optional[int] = ..., dst: _Optional[int] = ..., vote_request: _Optional[_Union[RaftVoteRequest, _Mapping]] = ..., vote_response: _Optional[_Union[RaftVoteResponse, _Mapping]] = ..., begin_quorum_epoch_request: _Optional[_Union[RaftBeginQuorumEpochRequest, _Mapping]] = ..., begin_quorum_epoch_response: _Optional[_Union[RaftBeginQuorumEpochResponse, _Mapping]] = ..., end_quorum_epoch_request: _Optional[_Union[RaftEndQuorumEpochRequest, _Mapping]] = ..., end_quorum_epoch_response: _Optional[_Union[RaftEndQuorumEpochResponse, _Mapping]] = ..., fetch_request: _Optional[_Union[RaftFetchRequest, _Mapping]] = ..., fetch_response: _Optional[_Union[RaftFetchResponse, _Mapping]] = ..., fetch_snapshot_request: _Optional[_Union[RaftFetchSnapshotRequest, _Mapping]] = ..., fetch_snapshot_response: _Optional[_Union[RaftFetchSnapshotResponse, _Mapping]] = ...) -> None: ...
