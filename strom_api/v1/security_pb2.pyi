from strom_api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SaslAuthenticateRequest(_message.Message):
    __slots__ = ("mechanism", "auth_bytes")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    auth_bytes: bytes
    def __init__(self, mechanism: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ...) -> None: ...

class SaslAuthenticateResponse(_message.Message):
    __slots__ = ("error", "auth_bytes", "session_token", "session_lifetime_ms", "enabled_mechanisms")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_MECHANISMS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    auth_bytes: bytes
    session_token: bytes
    session_lifetime_ms: int
    enabled_mechanisms: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., auth_bytes: _Optional[bytes] = ..., session_token: _Optional[bytes] = ..., session_lifetime_ms: _Optional[int] = ..., enabled_mechanisms: _Optional[_Iterable[str]] = ...) -> None: ...
