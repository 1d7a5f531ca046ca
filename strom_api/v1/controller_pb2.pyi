from strom_api.v1 import common_pb2 as _common_pb2
from strom_api.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREFERRED: _ClassVar[ElectionType]
    UNCLEAN: _ClassVar[ElectionType]

class AlterConfigOpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SET: _ClassVar[AlterConfigOpType]
    DELETE: _ClassVar[AlterConfigOpType]
    APPEND: _ClassVar[AlterConfigOpType]
    SUBTRACT: _ClassVar[AlterConfigOpType]
PREFERRED: ElectionType
UNCLEAN: ElectionType
SET: AlterConfigOpType
DELETE: AlterConfigOpType
APPEND: AlterConfigOpType
SUBTRACT: AlterConfigOpType

class ControllerError(_message.Message):
    __slots__ = ("error", "active_controller_id", "active_controller_address")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONTROLLER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    active_controller_id: int
    active_controller_address: str
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., active_controller_id: _Optional[int] = ..., active_controller_address: _Optional[str] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "endpoints", "rack", "previous_broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: bytes
    endpoints: _containers.RepeatedCompositeFieldContainer[_metadata_pb2.BrokerEndpoint]
    rack: str
    previous_broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[bytes] = ..., endpoints: _Optional[_Iterable[_Union[_metadata_pb2.BrokerEndpoint, _Mapping]]] = ..., rack: _Optional[str] = ..., previous_broker_epoch: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error", "broker_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    broker_epoch: int
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shut_down", "offline_replicas")
    class OfflineReplicas(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    offline_replicas: _containers.RepeatedCompositeFieldContainer[BrokerHeartbeatRequest.OfflineReplicas]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shut_down: _Optional[bool] = ..., offline_replicas: _Optional[_Iterable[_Union[BrokerHeartbeatRequest.OfflineReplicas, _Mapping]]] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error", "is_caught_up", "is_fenced", "should_shut_down")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "partitions")
    class Partition(_message.Message):
        __slots__ = ("topic_id", "partition", "leader_epoch", "partition_epoch", "new_isr", "leader_recovery_state")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        leader_epoch: int
        partition_epoch: int
        new_isr: _containers.RepeatedScalarFieldContainer[int]
        leader_recovery_state: _metadata_pb2.LeaderRecoveryState
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., leader_recovery_state: _Optional[_Union[_metadata_pb2.LeaderRecoveryState, str]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.Partition]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.Partition, _Mapping]]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error", "partitions")
    class Partition(_message.Message):
        __slots__ = ("topic_id", "partition", "error", "leader", "leader_epoch", "isr", "partition_epoch")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        LEADER_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        error: _common_pb2.Error
        leader: int
        leader_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        partition_epoch: int
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.Partition]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResponse.Partition, _Mapping]]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error", "first_producer_id", "count")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FIRST_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    first_producer_id: int
    count: int
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., first_producer_id: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
    class AssignmentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: _metadata_pb2.BrokerIdList
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[_metadata_pb2.BrokerIdList, _Mapping]] = ...) -> None: ...
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    assignments: _containers.MessageMap[int, _metadata_pb2.BrokerIdList]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Mapping[int, _metadata_pb2.BrokerIdList]] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Result(_message.Message):
        __slots__ = ("name", "error", "topic_id", "num_partitions", "replication_factor", "configs", "config_error")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        CONFIG_ERROR_FIELD_NUMBER: _ClassVar[int]
        name: str
        error: _common_pb2.Error
        topic_id: bytes
        num_partitions: int
        replication_factor: int
        configs: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Entry]
        config_error: _common_pb2.Error
        def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., topic_id: _Optional[bytes] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Iterable[_Union[DescribeConfigsResponse.Entry, _Mapping]]] = ..., config_error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreateTopicsResponse.Result, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Result(_message.Message):
        __slots__ = ("name", "error")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        name: str
        error: _common_pb2.Error
        def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DeleteTopicsResponse.Result, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("name", "count", "assignments", "validate_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    assignments: _containers.RepeatedCompositeFieldContainer[_metadata_pb2.BrokerIdList]
    validate_only: bool
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[_metadata_pb2.BrokerIdList, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("cluster_id", "controller_id", "brokers", "metadata_offset")
    class Broker(_message.Message):
        __slots__ = ("broker_id", "endpoints", "rack", "broker_epoch", "fenced", "in_controlled_shutdown")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
        RACK_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        FENCED_FIELD_NUMBER: _ClassVar[int]
        IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        endpoints: _containers.RepeatedCompositeFieldContainer[_metadata_pb2.BrokerEndpoint]
        rack: str
        broker_epoch: int
        fenced: bool
        in_controlled_shutdown: bool
        def __init__(self, broker_id: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[_metadata_pb2.BrokerEndpoint, _Mapping]]] = ..., rack: _Optional[str] = ..., broker_epoch: _Optional[int] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[DescribeClusterResponse.Broker]
    metadata_offset: int
    def __init__(self, cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[DescribeClusterResponse.Broker, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "high_watermark", "voters", "observers")
    class Replica(_message.Message):
        __slots__ = ("replica_id", "log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp")
        REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
        LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_FETCH_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        LAST_CAUGHT_UP_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        replica_id: int
        log_end_offset: int
        last_fetch_timestamp: int
        last_caught_up_timestamp: int
        def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_timestamp: _Optional[int] = ..., last_caught_up_timestamp: _Optional[int] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: _containers.RepeatedCompositeFieldContainer[DescribeQuorumResponse.Replica]
    observers: _containers.RepeatedCompositeFieldContainer[DescribeQuorumResponse.Replica]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[DescribeQuorumResponse.Replica, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[DescribeQuorumResponse.Replica, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics", "metadata_offset")
    class Partition(_message.Message):
        __slots__ = ("partition", "leader", "leader_epoch", "replicas", "isr", "adding_replicas", "removing_replicas", "eligible_leader_replicas")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        LEADER_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition: int
        leader: int
        leader_epoch: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        isr: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "topic_id", "error", "partitions", "configs", "is_internal")
        class ConfigsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        IS_INTERNAL_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: bytes
        error: _common_pb2.Error
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Partition]
        configs: _containers.ScalarMap[str, str]
        is_internal: bool
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[DescribeTopicsResponse.Partition, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ..., is_internal: _Optional[bool] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Topic]
    metadata_offset: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeTopicsResponse.Topic, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "partitions", "all_partitions")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ALL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    all_partitions: bool
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ..., all_partitions: _Optional[bool] = ...) -> None: ...

class PartitionResult(_message.Message):
    __slots__ = ("partition", "error")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    partition: TopicPartition
    error: _common_pb2.Error
    def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[PartitionResult]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[PartitionResult, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("reassignments", "keep_replication_factor")
    class Reassignment(_message.Message):
        __slots__ = ("partition", "replicas")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition: TopicPartition
        replicas: _metadata_pb2.BrokerIdList
        def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., replicas: _Optional[_Union[_metadata_pb2.BrokerIdList, _Mapping]] = ...) -> None: ...
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    KEEP_REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    reassignments: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.Reassignment]
    keep_replication_factor: bool
    def __init__(self, reassignments: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.Reassignment, _Mapping]]] = ..., keep_replication_factor: _Optional[bool] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[PartitionResult]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[PartitionResult, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "reassignments")
    class Ongoing(_message.Message):
        __slots__ = ("partition", "replicas", "adding_replicas", "removing_replicas")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition: TopicPartition
        replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    reassignments: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.Ongoing]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., reassignments: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.Ongoing, _Mapping]]] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("type", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: _metadata_pb2.ConfigResourceType
    name: str
    def __init__(self, type: _Optional[_Union[_metadata_pb2.ConfigResourceType, str]] = ..., name: _Optional[str] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only", "replace")
    class Op(_message.Message):
        __slots__ = ("name", "op", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OP_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        op: AlterConfigOpType
        value: str
        def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[AlterConfigOpType, str]] = ..., value: _Optional[str] = ...) -> None: ...
    class Resource(_message.Message):
        __slots__ = ("resource", "ops")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        ops: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Op]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Op, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Resource]
    validate_only: bool
    replace: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Resource, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., replace: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("error", "results")
    class Result(_message.Message):
        __slots__ = ("resource", "error")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error: _common_pb2.Error
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[IncrementalAlterConfigsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources", "keys")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResource]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResource, _Mapping]]] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("results",)
    class Synonym(_message.Message):
        __slots__ = ("name", "value", "source")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        source: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("name", "value", "source", "read_only", "is_sensitive", "synonyms")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        SYNONYMS_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        source: str
        read_only: bool
        is_sensitive: bool
        synonyms: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Synonym]
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[str] = ..., read_only: _Optional[bool] = ..., is_sensitive: _Optional[bool] = ..., synonyms: _Optional[_Iterable[_Union[DescribeConfigsResponse.Synonym, _Mapping]]] = ...) -> None: ...
    class Result(_message.Message):
        __slots__ = ("resource", "error", "entries")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error: _common_pb2.Error
        entries: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Entry]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[DescribeConfigsResponse.Entry, _Mapping]]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Result]
    def __init__(self, results: _Optional[_Iterable[_Union[DescribeConfigsResponse.Result, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class AclBindingFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations",)
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, creations: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("error", "results")
    class Result(_message.Message):
        __slots__ = ("error",)
        ERROR_FIELD_NUMBER: _ClassVar[int]
        error: _common_pb2.Error
        def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[CreateAclsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[CreateAclsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclBindingFilter
    def __init__(self, filter: _Optional[_Union[AclBindingFilter, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error", "acls")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    acls: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., acls: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBindingFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBindingFilter, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("error", "results")
    class Result(_message.Message):
        __slots__ = ("error", "deleted")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        DELETED_FIELD_NUMBER: _ClassVar[int]
        error: _common_pb2.Error
        deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
        def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DeleteAclsResponse.Result, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions")
    class Deletion(_message.Message):
        __slots__ = ("name", "mechanism")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        name: str
        mechanism: int
        def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ...) -> None: ...
    class Upsertion(_message.Message):
        __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        SALT_FIELD_NUMBER: _ClassVar[int]
        SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
        name: str
        mechanism: int
        iterations: int
        salt: bytes
        salted_password: bytes
        def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsRequest.Deletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsRequest.Upsertion]
    def __init__(self, deletions: _Optional[_Iterable[_Union[AlterUserScramCredentialsRequest.Deletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[AlterUserScramCredentialsRequest.Upsertion, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("error", "results")
    class Result(_message.Message):
        __slots__ = ("user", "error")
        USER_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        user: str
        error: _common_pb2.Error
        def __init__(self, user: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterUserScramCredentialsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("error", "results")
    class CredentialInfo(_message.Message):
        __slots__ = ("mechanism", "iterations")
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        mechanism: int
        iterations: int
        def __init__(self, mechanism: _Optional[int] = ..., iterations: _Optional[int] = ...) -> None: ...
    class Result(_message.Message):
        __slots__ = ("user", "error", "credential_infos")
        USER_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        CREDENTIAL_INFOS_FIELD_NUMBER: _ClassVar[int]
        user: str
        error: _common_pb2.Error
        credential_infos: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.CredentialInfo]
        def __init__(self, user: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., credential_infos: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.CredentialInfo, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: ControllerError
    results: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.Result]
    def __init__(self, error: _Optional[_Union[ControllerError, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.Result, _Mapping]]] = ...) -> None: ...
