"""Kafka's numeric error codes on the Kafka listener (server/kafka/error_codes.py): every
strom_api ErrorCode member has Kafka's code of the same name, the number common.proto gives
it, so both front ends send one code per error."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KafkaErrorCode

from server.kafka.error_codes import kafka_error_code
from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2


def test_every_error_name_has_kafkas_code_and_the_contracts_number():
    for name in ErrorCode:
        code = kafka_error_code(name)
        assert code.name == name.name.lower()
        assert int(code) == common_pb2.ErrorCode.Value(name.name), name


def test_known_codes_and_no_error():
    assert kafka_error_code(None) == KafkaErrorCode.none == 0
    assert kafka_error_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == 3
    assert kafka_error_code(ErrorCode.UNSUPPORTED_VERSION) == 35
    assert kafka_error_code(ErrorCode.TOPIC_AUTHORIZATION_FAILED) == 29
