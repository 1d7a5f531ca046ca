"""DescribeLogDirs (key 35) and DescribeProducers (61) on the Kafka listener: answered by
this broker from its own replicas, as Kafka's brokers answer them, through the
front-end-neutral paths server/requests/log_dirs.py and producers.py (the authorization and
the rules there); this module converts."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i32, i64

from broker.replica_manager import ReplicaManager
from metadata.errors import ApiError
from server.kafka.apis import DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS
from server.kafka.error_codes import kafka_error_code
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import per_group, per_item
from server.request_authorization import RequestAuthorizer
from server.request_session import current_session
from server.requests.log_dirs import describe_log_dirs
from server.requests.producers import PartitionProducers, describe_producers
from strom_api.error_codes import ErrorCode

_NO_THROTTLE = datetime.timedelta(0)


def _code(error: ApiError | None) -> Any:
    return kafka_error_code(None if error is None else error.error_name)


class BrokerAdmin:
    def __init__(
        self, replicas: Callable[[], ReplicaManager | None], authz: RequestAuthorizer
    ) -> None:
        self.replicas = replicas
        self.authz = authz

    def _manager(self) -> ReplicaManager:
        manager = self.replicas()
        if manager is None:  # a dispatcher made without a broker (the listener's unit tests)
            raise ApiError(ErrorCode.BROKER_NOT_AVAILABLE, "This node serves no broker.")
        return manager

    async def describe_log_dirs(self, request: Request) -> Any:
        body = request.body
        wanted = (
            None
            if body.topics is None
            else dict(await per_item(((str(t.topic), t.partitions) for t in body.topics), _int_of))
        )
        response_type = load_response_schema(DESCRIBE_LOG_DIRS, request.api_version)
        result_type = nested(response_type, "DescribeLogDirsResult")
        topic_type = nested(response_type, "DescribeLogDirsTopic")
        partition_type = nested(response_type, "DescribeLogDirsPartition")
        refusal, dirs = await describe_log_dirs(
            self._manager(), self.authz, wanted, current_session()
        )
        results = []
        for d in dirs:
            topics = await per_group(
                d.topics.items(),
                lambda _, r: build(
                    partition_type,
                    partition_index=i32(r.partition),
                    partition_size=i64(r.size),
                    offset_lag=i64(r.offset_lag),
                    is_future_key=False,
                ),
                lambda name, partitions: build(topic_type, name=name, partitions=tuple(partitions)),
            )
            results.append(
                build(
                    result_type,
                    error_code=_code(d.error),
                    log_dir=d.log_dir,
                    topics=tuple(topics),
                    total_bytes=i64(d.total_bytes),
                    usable_bytes=i64(d.usable_bytes),
                    is_cordoned=False,
                )
            )
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=_code(refusal),
            results=tuple(results),
        )

    async def describe_producers(self, request: Request) -> Any:
        # In slices of partitions, not of topics: one topic may name 100,000 of them.
        topics = await per_item(
            ((str(t.name), t.partition_indexes) for t in request.body.topics),
            _int_of,
        )
        answers = await describe_producers(self._manager(), self.authz, topics, current_session())
        response_type = load_response_schema(DESCRIBE_PRODUCERS, request.api_version)
        topic_type = nested(response_type, "TopicResponse")
        partition_type = nested(response_type, "PartitionResponse")
        state_type = nested(response_type, "ProducerState")

        def partition_response(_: str, p: PartitionProducers) -> Any:
            return build(
                partition_type,
                partition_index=i32(p.partition),
                error_code=_code(p.error),
                error_message=None if p.error is None else p.error.message,
                active_producers=tuple(
                    build(
                        state_type,
                        producer_id=i64(s.producer_id),
                        producer_epoch=i32(s.producer_epoch),
                        last_sequence=i32(s.last_sequence),
                        last_timestamp=i64(s.last_timestamp),
                        coordinator_epoch=i32(s.coordinator_epoch),
                        current_txn_start_offset=i64(s.current_txn_start_offset),
                    )
                    for s in p.producers
                ),
            )

        topics = await per_group(
            answers,
            partition_response,
            lambda name, partitions: build(topic_type, name=name, partitions=tuple(partitions)),
        )
        return build(response_type, throttle_time=_NO_THROTTLE, topics=tuple(topics))


def _int_of(_: str, value: Any) -> int:
    return int(value)
