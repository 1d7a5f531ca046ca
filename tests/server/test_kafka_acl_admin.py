"""The Kafka listener's CreateAcls and DeleteAcls (server/kafka/acl_admin.py) refuse a
request past the controller's limit per request (metadata/acl_control.MAX_ACLS_PER_REQUEST)
before converting any binding or filter, and do not forward it: a 1 MB CreateAcls holds
tens of thousands of bindings, converted for nothing before. Without an authorizer they
answer SECURITY_DISABLED first, as Kafka does."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from metadata.acl_control import MAX_ACLS_PER_REQUEST
from server.kafka.acl_admin import AclAdmin
from server.kafka.apis import CREATE_ACLS, DELETE_ACLS, SERVED
from server.kafka.frames import Request
from server.request_authorization import RequestAuthorizer
from tests.server.test_client_requests import nobody_allowed
from tests.server.test_kafka_group_apis import _element, sample


class Controller:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, method: str, request: Any) -> Any:
        self.asked.append(method)
        raise AssertionError("a request past the limit is not forwarded")


def _many(key: int, count: int) -> Request:
    version = SERVED[key].max_version
    body_type = load_request_schema(key, version)
    field = "creations" if key == CREATE_ACLS else "filters"
    item = sample(_element(body_type, field))
    body = dataclasses.replace(sample(body_type), **{field: (item,) * count})
    return Request(key, version, 7, "client", body)


@pytest.mark.parametrize("key", [CREATE_ACLS, DELETE_ACLS], ids=["CreateAcls", "DeleteAcls"])
def test_a_request_past_the_limit_is_refused_whole_before_it_is_converted(key):
    controller = Controller()
    admin = AclAdmin(controller, nobody_allowed())
    handler = admin.create_acls if key == CREATE_ACLS else admin.delete_acls
    count = MAX_ACLS_PER_REQUEST + 1
    response = asyncio.run(handler(_many(key, count)))
    results = response.results if key == CREATE_ACLS else response.filter_results
    assert len(results) == count
    assert {r.error_code for r in results} == {ErrorCode.invalid_request}
    assert str(MAX_ACLS_PER_REQUEST) in results[0].error_message
    assert controller.asked == []


@pytest.mark.parametrize("key", [CREATE_ACLS, DELETE_ACLS], ids=["CreateAcls", "DeleteAcls"])
def test_without_an_authorizer_the_answer_is_security_disabled_whatever_the_count(key):
    admin = AclAdmin(Controller(), RequestAuthorizer())
    handler = admin.create_acls if key == CREATE_ACLS else admin.delete_acls
    response = asyncio.run(handler(_many(key, MAX_ACLS_PER_REQUEST + 1)))
    results = response.results if key == CREATE_ACLS else response.filter_results
    assert {r.error_code for r in results} == {ErrorCode.security_disabled}
