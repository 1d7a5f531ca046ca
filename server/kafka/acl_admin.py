"""DescribeAcls (key 29), CreateAcls (30) and DeleteAcls (31) on the Kafka listener, on the
path of the gRPC front end's calls of the same names (server/controller_forwarder.py
authorized_forwarding: the cluster's DESCRIBE or ALTER as server/controller_authorization.py
checks it, then the active controller, where metadata/acl_control.py validates bindings and
matches filters: ANY, MATCH and null strings as Kafka's AclBindingFilter); the answers
converted to the request's version.

Decided as Kafka 4 (its AclApis):
- With no authorizer configured the listener answers SECURITY_DISABLED, "No Authorizer is
  configured.", per creation, per filter, or for the whole description, and sends nothing
  to the controller. This is the Kafka protocol's answer, so it is made here: Strom's own
  AdminClient may still manage ACLs on a cluster before it turns its authorizer on.
- A refusal of the whole request (CLUSTER_AUTHORIZATION_FAILED for a caller without the
  cluster's ALTER or DESCRIBE, REQUEST_TIMED_OUT when no controller answered) is given to
  every creation or filter, as Kafka's getErrorResponse does for these requests.
- DescribeAcls groups the ACLs by resource pattern, in the controller's order.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i8

from metadata.acl_control import check_count
from metadata.errors import ApiError
from server.controller_forwarder import ControllerCall
from server.kafka.apis import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from server.kafka.controller_answers import (
    NO_ERROR,
    Outcome,
    item_outcome,
    refusal,
)
from server.kafka.controller_calls import forward
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.request_authorization import RequestAuthorizer
from strom_api.v1 import controller_pb2

_NO_THROTTLE = datetime.timedelta(0)
SECURITY_DISABLED: Outcome = (KafkaErrorCode.security_disabled, "No Authorizer is configured.")


class AclAdmin:
    def __init__(self, call: ControllerCall, authz: RequestAuthorizer) -> None:
        self.call = call
        self.authz = authz

    async def _forward(self, method: str, pb_request: Any) -> tuple[Any, Outcome | None]:
        """forward(), unless no authorizer is configured: SECURITY_DISABLED, as Kafka."""
        if not self.authz.enabled:
            return None, SECURITY_DISABLED
        return await forward(self.call, method, pb_request)

    def _refused_whole(self, count: int, what: str) -> Outcome | None:
        """A refusal of every binding or filter before any is converted: SECURITY_DISABLED
        without an authorizer (as _forward answers), INVALID_REQUEST past the controller's
        limit per request (metadata/acl_control.py, which the controller checks too)."""
        if not self.authz.enabled:
            return SECURITY_DISABLED
        try:
            check_count(count, what)
        except ApiError as error:
            return refusal(error)
        return None

    # --- DescribeAcls -------------------------------------------------------------------

    async def describe_acls(self, request: Request) -> Any:
        body = request.body
        pb_filter = _filter_pb(body)
        response, failed = await self._forward(
            "DescribeAcls", controller_pb2.DescribeAclsRequest(filter=pb_filter)
        )
        response_type = load_response_schema(DESCRIBE_ACLS, request.api_version)
        resource_type = nested(response_type, "DescribeAclsResource")
        description_type = nested(response_type, "AclDescription")
        grouped: dict[tuple[int, str, int], list[Any]] = {}
        for acl in response.acls if response is not None else ():
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            grouped.setdefault(key, []).append(
                build(
                    description_type,
                    principal=acl.principal,
                    host=acl.host,
                    operation=i8(acl.operation),
                    permission_type=i8(acl.permission_type),
                )
            )
        code, message = failed or NO_ERROR
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            error_code=code,
            error_message=message,
            resources=tuple(
                build(
                    resource_type,
                    resource_type=i8(kind),
                    resource_name=name,
                    pattern_type=i8(pattern),
                    acls=tuple(acls),
                )
                for (kind, name, pattern), acls in grouped.items()
            ),
        )

    # --- CreateAcls ---------------------------------------------------------------------

    async def create_acls(self, request: Request) -> Any:
        creations = request.body.creations
        refused = self._refused_whole(len(creations), "ACL creations")
        if refused is not None:  # before 100,000 bindings are converted for nothing
            return _created(request, [refused] * len(creations))
        pb_request = controller_pb2.CreateAclsRequest(
            creations=[
                controller_pb2.AclBinding(
                    resource_type=int(c.resource_type),
                    resource_name=str(c.resource_name),
                    pattern_type=int(c.resource_pattern_type),
                    principal=str(c.principal),
                    host=str(c.host),
                    operation=int(c.operation),
                    permission_type=int(c.permission_type),
                )
                for c in creations
            ]
        )
        response, failed = await self._forward("CreateAcls", pb_request)
        outcomes = _per_item(len(creations), failed, () if response is None else response.results)
        return _created(request, outcomes)

    # --- DeleteAcls ---------------------------------------------------------------------

    async def delete_acls(self, request: Request) -> Any:
        filters = request.body.filters
        failed = self._refused_whole(len(filters), "ACL deletion filters")
        response = None
        if failed is None:  # else refused before the filters are converted for nothing
            pb_request = controller_pb2.DeleteAclsRequest(filters=[_filter_pb(f) for f in filters])
            response, failed = await self._forward("DeleteAcls", pb_request)
        results = () if response is None else response.results
        outcomes = _per_item(len(filters), failed, results)
        response_type = load_response_schema(DELETE_ACLS, request.api_version)
        filter_type = nested(response_type, "DeleteAclsFilterResult")
        matching_type = nested(response_type, "DeleteAclsMatchingAcl")
        deleted = [list(r.deleted) for r in results] or [[] for _ in filters]
        return build(
            response_type,
            throttle_time=_NO_THROTTLE,
            filter_results=tuple(
                build(
                    filter_type,
                    error_code=code,
                    error_message=message,
                    matching_acls=tuple(
                        build(
                            matching_type,
                            error_code=KafkaErrorCode.none,
                            error_message=None,
                            resource_type=i8(acl.resource_type),
                            resource_name=acl.resource_name,
                            pattern_type=i8(acl.pattern_type),
                            principal=acl.principal,
                            host=acl.host,
                            operation=i8(acl.operation),
                            permission_type=i8(acl.permission_type),
                        )
                        for acl in matched
                    ),
                )
                for (code, message), matched in zip(outcomes, deleted, strict=True)
            ),
        )


def _filter_pb(f: Any) -> controller_pb2.AclBindingFilter:
    """A DescribeAcls request's or a DeleteAcls filter's fields (the same names in both) as
    the controller's filter: a null string stays unset, which matches every string."""
    out = controller_pb2.AclBindingFilter(
        resource_type=int(f.resource_type_filter),
        pattern_type=int(f.pattern_type_filter),
        operation=int(f.operation),
        permission_type=int(f.permission_type),
    )
    if f.resource_name_filter is not None:
        out.resource_name = f.resource_name_filter
    if f.principal_filter is not None:
        out.principal = f.principal_filter
    if f.host_filter is not None:
        out.host = f.host_filter
    return out


def _created(request: Request, outcomes: Sequence[Outcome]) -> Any:
    response_type = load_response_schema(CREATE_ACLS, request.api_version)
    result_type = nested(response_type, "AclCreationResult")
    return build(
        response_type,
        throttle_time=_NO_THROTTLE,
        results=tuple(
            build(result_type, error_code=code, error_message=message) for code, message in outcomes
        ),
    )


def _per_item(count: int, failed: Outcome | None, results: Sequence[Any]) -> list[Outcome]:
    """One outcome per creation or filter: the whole request's refusal given to each."""
    if failed is not None:
        return [failed] * count
    return [item_outcome(r) for r in results]
