"""The Kafka listener's SCRAM credential APIs (server/kafka/scram_admin.py) refuse a
request past the controller's limits (metadata/scram_control.py: MAX_ALTERATIONS,
MAX_DESCRIBED_USERS) before converting its items, and do not forward it."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from metadata.scram_control import MAX_ALTERATIONS, MAX_DESCRIBED_USERS
from server.kafka.apis import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    SERVED,
)
from server.kafka.frames import Request
from server.kafka.scram_admin import ScramAdmin
from tests.server.test_kafka_group_apis import _element, sample


async def not_to_be_asked(method: str, request: Any) -> Any:
    raise AssertionError(f"{method} past the limit is not forwarded")


def _request(key: int, **fields: Any) -> Request:
    version = SERVED[key].max_version
    body = dataclasses.replace(sample(load_request_schema(key, version)), **fields)
    return Request(key, version, 7, "client", body)


def test_alterations_past_the_limit_are_refused_for_every_user_named():
    body_type = load_request_schema(
        ALTER_USER_SCRAM_CREDENTIALS, SERVED[ALTER_USER_SCRAM_CREDENTIALS].max_version
    )
    upsertion = sample(_element(body_type, "upsertions"))
    upsertions = tuple(
        dataclasses.replace(upsertion, name=f"u{i}") for i in range(MAX_ALTERATIONS + 1)
    )
    request = _request(ALTER_USER_SCRAM_CREDENTIALS, deletions=(), upsertions=upsertions)
    response = asyncio.run(ScramAdmin(not_to_be_asked).alter_user_scram_credentials(request))
    assert len(response.results) == MAX_ALTERATIONS + 1
    assert {r.error_code for r in response.results} == {ErrorCode.invalid_request}
    assert str(MAX_ALTERATIONS) in response.results[0].error_message


def test_a_description_of_too_many_users_is_refused_whole():
    body_type = load_request_schema(
        DESCRIBE_USER_SCRAM_CREDENTIALS, SERVED[DESCRIBE_USER_SCRAM_CREDENTIALS].max_version
    )
    user = sample(_element(body_type, "users"))
    users = tuple(dataclasses.replace(user, name=f"u{i}") for i in range(MAX_DESCRIBED_USERS + 1))
    request = _request(DESCRIBE_USER_SCRAM_CREDENTIALS, users=users)
    response = asyncio.run(ScramAdmin(not_to_be_asked).describe_user_scram_credentials(request))
    assert response.error_code == ErrorCode.invalid_request
    assert response.results == ()
