"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (51) v0 on the Kafka
listener, on the path of the gRPC front end's calls of the same names
(server/controller_forwarder.py authorized_forwarding: the cluster's DESCRIBE or ALTER, then
the active controller, where metadata/scram_control.py makes Kafka's checks per user:
UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE).
The client salts the password, as Kafka's Admin client does: the request carries the salt
and the salted password, never the password.

Decided as Kafka 4: a refusal of the whole request (CLUSTER_AUTHORIZATION_FAILED,
REQUEST_TIMED_OUT when no controller answered) is DescribeUserScramCredentials' top-level
error, and AlterUserScramCredentials' error for every user named, once each (Kafka's
getErrorResponse). A null or empty user list describes every user with a credential.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i8, i32

from metadata.errors import ApiError
from metadata.scram_control import check_alterations, check_described
from server.controller_forwarder import ControllerCall
from server.kafka.apis import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from server.kafka.controller_answers import (
    NO_ERROR,
    Outcome,
    item_outcome,
    refusal,
)
from server.kafka.controller_calls import forward
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from strom_api.v1 import controller_pb2

_NO_THROTTLE = datetime.timedelta(0)


class ScramAdmin:
    def __init__(self, call: ControllerCall) -> None:
        self.call = call

    async def describe_user_scram_credentials(self, request: Request) -> Any:
        named = request.body.users or ()
        response, failed = None, _refused(check_described, len(named))
        if failed is None:  # else refused before the names are converted for nothing
            users = [str(u.name) for u in named]
            response, failed = await forward(
                self.call,
                "DescribeUserScramCredentials",
                controller_pb2.DescribeUserScramCredentialsRequest(users=users),
            )
        response_type = load_response_schema(DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version)
        result_type = nested(response_type, "DescribeUserScramCredentialsResult")
        info_type = nested(response_type, "CredentialInfo")
        code, message = failed or NO_ERROR
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=code,
            error_message=message,
            results=tuple(
                build(
                    result_type,
                    user=r.user,
                    error_code=result_code,
                    error_message=result_message,
                    credential_infos=tuple(
                        build(info_type, mechanism=i8(c.mechanism), iterations=i32(c.iterations))
                        for c in r.credential_infos
                    ),
                )
                for r in (response.results if response is not None else ())
                for result_code, result_message in (item_outcome(r),)
            ),
        )

    async def alter_user_scram_credentials(self, request: Request) -> Any:
        body = request.body
        results: Any = ()
        failed = _refused(check_alterations, len(body.deletions) + len(body.upsertions))
        if failed is None:  # else refused before the items are converted for nothing
            response, failed = await self._forward_alterations(body)
            if failed is None:
                results = response.results
        if failed is not None:
            named = dict.fromkeys(
                [str(d.name) for d in body.deletions] + [str(u.name) for u in body.upsertions]
            )
            outcomes = [(user, failed) for user in named]
        else:
            outcomes = [(r.user, item_outcome(r)) for r in results]
        response_type = load_response_schema(ALTER_USER_SCRAM_CREDENTIALS, request.api_version)
        result_type = nested(response_type, "AlterUserScramCredentialsResult")
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            results=tuple(
                build(result_type, user=user, error_code=code, error_message=message)
                for user, (code, message) in outcomes
            ),
        )

    async def _forward_alterations(self, body: Any) -> tuple[Any, Outcome | None]:
        pb_request = controller_pb2.AlterUserScramCredentialsRequest(
            deletions=[
                controller_pb2.AlterUserScramCredentialsRequest.Deletion(
                    name=str(d.name), mechanism=int(d.mechanism)
                )
                for d in body.deletions
            ],
            upsertions=[
                controller_pb2.AlterUserScramCredentialsRequest.Upsertion(
                    name=str(u.name),
                    mechanism=int(u.mechanism),
                    iterations=int(u.iterations),
                    salt=bytes(u.salt),
                    salted_password=bytes(u.salted_password),
                )
                for u in body.upsertions
            ],
        )
        return await forward(self.call, "AlterUserScramCredentials", pb_request)


def _refused(check: Callable[[int], None], count: int) -> Outcome | None:
    """The controller's limit of items per request (metadata/scram_control.py), checked
    before any item is converted: its INVALID_REQUEST, as the controller answers."""
    try:
        check(count)
    except ApiError as error:
        return refusal(error)
    return None
