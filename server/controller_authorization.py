"""The authorization of ControllerService calls, the same on both sides of forwarding: a
broker checks its client's principal before it forwards an admin request, and a
controller checks its own caller, so a client calling a controller's listener directly is
checked too (issue 18). The operations are server/request_authorization.py's.

What a call may do:
- refused whole (CLUSTER_AUTHORIZATION_FAILED, or TOPIC_AUTHORIZATION_FAILED for
  CreatePartitions): answered with that ControllerError, nothing done;
- refused in part (CreateTopics, DeleteTopics, DescribeTopics, IncrementalAlterConfigs,
  DescribeConfigs): the refused topics or resources answered with their error, the rest
  served;
- a listing of every topic (DescribeTopics without names) answered without the topics the
  principal may not DESCRIBE;
- CreateTopics' answer without the configs of a topic the principal may not
  DESCRIBE_CONFIGS (Kafka's topic_config_error_code).

On a controller, a caller with CLUSTER_ACTION on the cluster is a broker forwarding a
request it has already authorized for its client (Kafka's Envelope, which needs
CLUSTER_ACTION): its admin calls are served as asked. DescribeCluster needs nothing, as in
Kafka. RPCs not named in server/request_authorization.py (added by later work) pass
unchecked until they are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from metadata.errors import ApiError
from server.api_errors import error_pb, make_error
from server.request_authorization import CLUSTER_OPERATION, RequestAuthorizer
from strom_api.acls import CLUSTER_NAME, AclOperation, ResourceType
from strom_api.error_codes import ErrorCode
from strom_api.v1 import controller_pb2, controller_pb2_grpc
from strom_api.v1 import metadata_pb2 as mpb

Serve = Callable[[Any], Awaitable[Any]]


def _whole(method: str, error: ApiError) -> Any:
    response = getattr(controller_pb2, f"{method}Response")()
    response.error.CopyFrom(
        controller_pb2.ControllerError(error=error_pb(error), active_controller_id=-1)
    )
    return response


def _without(request: Any, field: str, keep: Callable[[Any], bool]) -> Any:
    """A copy of `request` whose repeated `field` holds only the items `keep` accepts."""
    copy = type(request)()
    copy.CopyFrom(request)
    kept = [item for item in getattr(request, field) if keep(item)]
    del getattr(copy, field)[:]
    getattr(copy, field).extend(kept)
    return copy


async def authorized_call(
    authz: RequestAuthorizer, method: str, request: Any, serve: Serve, *, on_controller: bool
) -> Any:
    """`serve(request)` for what the caller may do, the refusals added to its answer."""
    if not authz.enabled or method == "DescribeCluster":
        return await serve(request)
    if on_controller and authz.allowed(
        method, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        return await serve(request)  # a broker forwarding what it authorized
    if method in CLUSTER_OPERATION:
        error = authz.cluster(method)
    elif method == "CreatePartitions":
        error = authz.topic(method, request.name)
    elif method == "CreateTopics":
        refused = authz.create_topics(method, [t.name for t in request.topics])
        response = await _in_part(method, request, "topics", refused, lambda t: t.name, serve)
        return _configs_described(authz, response)
    elif method == "DeleteTopics":
        refused = authz.topics(method, request.names)
        return await _in_part(method, request, "names", refused, lambda name: name, serve)
    elif method == "DescribeTopics":
        return await _describe_topics(authz, request, serve)
    elif method in ("IncrementalAlterConfigs", "DescribeConfigs"):
        return await _configs(authz, method, request, serve)
    else:
        error = None
    return _whole(method, error) if error is not None else await serve(request)


async def _in_part(
    method: str,
    request: Any,
    field: str,
    refused: dict[str, ApiError],
    name_of: Callable[[Any], str],
    serve: Serve,
) -> Any:
    """The topics of `field` not refused served, the refused ones answered with their error."""
    if not refused:
        return await serve(request)
    allowed = _without(request, field, lambda item: name_of(item) not in refused)
    response = await serve(allowed) if getattr(allowed, field) else _empty(method)
    for name, error in refused.items():
        response.topics.add(name=name).error.CopyFrom(error_pb(error))
    return response


def _configs_described(authz: RequestAuthorizer, response: Any) -> Any:
    """CreateTopics' answer without the configs of the topics the caller may not
    DESCRIBE_CONFIGS, each marked TOPIC_AUTHORIZATION_FAILED (Kafka's ControllerApis:
    topicConfigErrorCode)."""
    for result in response.topics:
        if not result.configs:
            continue
        if not authz.allowed(
            "CreateTopics",
            AclOperation.DESCRIBE_CONFIGS,
            ResourceType.TOPIC,
            result.name,
            log_denied=False,
        ):
            del result.configs[:]
            result.config_error.CopyFrom(
                make_error(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    f"Not authorized to describe the configs of topic '{result.name}'.",
                )
            )
    return response


async def _configs(authz: RequestAuthorizer, method: str, request: Any, serve: Serve) -> Any:
    """ALTER_CONFIGS / DESCRIBE_CONFIGS per resource: the topic's, or the cluster's for a
    broker's configs."""
    altering = method == "IncrementalAlterConfigs"
    operation = AclOperation.ALTER_CONFIGS if altering else AclOperation.DESCRIBE_CONFIGS
    refusals: list[tuple[Any, ApiError]] = []
    keep: list[bool] = []
    for item in request.resources:
        resource = item.resource if altering else item
        error = authz.config_resource(
            method, operation, int(resource.type) == mpb.TOPIC, resource.name
        )
        keep.append(error is None)
        if error is not None:
            refusals.append((resource, error))
    if not refusals:
        return await serve(request)
    flags = iter(keep)
    allowed = _without(request, "resources", lambda _: next(flags))
    response = await serve(allowed) if allowed.resources else _empty(method)
    for resource, error in refusals:
        response.results.add(resource=resource).error.CopyFrom(error_pb(error))
    return response


def authorizing(servicer: Any, authz: RequestAuthorizer, *, on_controller: bool) -> Any:
    """`servicer` (a ControllerService servicer) with every call authorized first."""
    methods = {}
    for name in dir(controller_pb2_grpc.ControllerServiceServicer):
        if name.startswith("_"):
            continue

        def make(method: str) -> Callable[..., Awaitable[Any]]:
            inner = getattr(servicer, method)

            async def handler(self: Any, request: Any, context: Any) -> Any:
                async def serve(allowed: Any) -> Any:
                    return await inner(allowed, context)

                return await authorized_call(
                    authz, method, request, serve, on_controller=on_controller
                )

            handler.__name__ = method
            return handler

        methods[name] = make(name)
    cls = type("Authorizing", (controller_pb2_grpc.ControllerServiceServicer,), methods)
    return cls()


def _empty(method: str) -> Any:
    return getattr(controller_pb2, f"{method}Response")()


async def _describe_topics(authz: RequestAuthorizer, request: Any, serve: Serve) -> Any:
    if not request.names:  # every topic: those it may not DESCRIBE are left out
        response = await serve(request)
        visible = set(authz.visible_topics([t.name for t in response.topics]))
        kept = [t for t in response.topics if t.name in visible]
        del response.topics[:]
        response.topics.extend(kept)
        return response
    refused = authz.topics("DescribeTopics", request.names)
    if not refused:
        return await serve(request)
    allowed = _without(request, "names", lambda name: name not in refused)
    if allowed.names:
        response = await serve(allowed)
    else:
        response = controller_pb2.DescribeTopicsResponse()
    for name, error in refused.items():
        response.topics.add(name=name).error.CopyFrom(error_pb(error))
    return response
