"""DescribeConfigs (key 32), IncrementalAlterConfigs (44) and AlterConfigs (33) on the Kafka
listener, on the path of the gRPC front end's DescribeConfigs and IncrementalAlterConfigs
(server/controller_forwarder.py authorized_forwarding: DESCRIBE_CONFIGS / ALTER_CONFIGS per
resource as server/controller_authorization.py checks them, then the active controller,
where metadata/config_control.py describes and checks). AlterConfigs is Kafka's
non-incremental form: the controller's IncrementalAlterConfigs with `replace`, every config
of a resource the request does not name deleted (Kafka's legacyAlterConfigs).

What only Kafka's messages have is added here: each resource's own configuration_keys (the
controller's request has one list for all, so every config is asked for and each resource's
answer cut to its keys), include_synonyms, and from v3 each config's type and, when asked
for, its documentation (metadata/config_docs.py)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i8

from metadata.config_docs import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDoc
from server.controller_forwarder import ControllerCall, NotForwarded
from server.kafka.apis import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from server.kafka.config_entries import source_id, type_id
from server.kafka.controller_answers import Outcome, item_outcome, not_forwarded, whole_outcome
from server.kafka.frames import Request
from server.kafka.versioned import build, nested
from server.loop_slices import collected, each, per_group
from strom_api.v1 import controller_pb2
from strom_api.v1 import metadata_pb2 as mpb

_NO_THROTTLE = datetime.timedelta(0)
_DOCS: dict[int, dict[str, ConfigDoc]] = {mpb.TOPIC: TOPIC_CONFIGS, mpb.BROKER: BROKER_CONFIGS}

Resource = tuple[int, str]


def _resource(type_: int, name: str) -> Any:
    return controller_pb2.ConfigResource(type=type_, name=name)  # type: ignore[arg-type]


def _key(resource: Any) -> Resource:
    return int(resource.type), resource.name


class ConfigAdmin:
    def __init__(self, call: ControllerCall) -> None:
        self.call = call

    async def describe_configs(self, request: Request) -> Any:
        body = request.body
        # Every loop over the resources in loop slices: a 1 MB request may name 33,333 of
        # them, each answered with its entries (the Kafka-protocol fuzzer's seed 24,
        # case 517: 0.43 s of the loop).
        asked = await collected((int(r.resource_type), r.resource_name) for r in body.resources)
        pb_request = controller_pb2.DescribeConfigsRequest(
            resources=await collected(_resource(t, n) for t, n in dict.fromkeys(asked))
        )
        results: dict[Resource, Any] = {}
        failed: Outcome | None = None
        try:
            response = await self.call("DescribeConfigs", pb_request)
        except NotForwarded as exc:
            failed = not_forwarded(exc.error_name, str(exc))
        else:
            results = {_key(r.resource): r async for r in each(response.results)}
        response_type = load_response_schema(DESCRIBE_CONFIGS, request.api_version)
        result_type = nested(response_type, "DescribeConfigsResult")
        entry_type = nested(response_type, "DescribeConfigsResourceResult")
        synonym_type = nested(response_type, "DescribeConfigsSynonym")
        include_synonyms = getattr(body, "include_synonyms", False)
        include_documentation = getattr(body, "include_documentation", False)
        out = []
        async for resource in each(body.resources):
            key = (int(resource.resource_type), resource.resource_name)
            result = results.get(key)
            code, message = failed or (item_outcome(result) if result else _missing(key))
            entries: tuple[Any, ...] = ()
            if result is not None and failed is None:
                wanted = resource.configuration_keys
                docs = _DOCS.get(key[0], {})
                entries = tuple(
                    _entry(
                        entry_type,
                        synonym_type,
                        e,
                        docs.get(e.name),
                        include_synonyms,
                        include_documentation,
                    )
                    for e in result.entries
                    if wanted is None or e.name in wanted
                )
            out.append(
                build(
                    result_type,
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=entries,
                )
            )
        return build(response_type, throttle_time=_NO_THROTTLE, results=tuple(out))

    async def incremental_alter_configs(self, request: Request) -> Any:
        pb_request = await _ops_request(request.body, replace=False)
        return await self._alter(request, INCREMENTAL_ALTER_CONFIGS, pb_request)

    async def alter_configs(self, request: Request) -> Any:
        pb_request = await _ops_request(request.body, replace=True)
        return await self._alter(request, ALTER_CONFIGS, pb_request)

    async def _alter(self, request: Request, api_key: int, pb_request: Any) -> Any:
        results: dict[Resource, Outcome] = {}
        failed: Outcome | None = None
        try:
            response = await self.call("IncrementalAlterConfigs", pb_request)
        except NotForwarded as exc:
            failed = not_forwarded(exc.error_name, str(exc))
        else:
            failed = whole_outcome(response)
            results = {_key(r.resource): item_outcome(r) async for r in each(response.results)}
        response_type = load_response_schema(api_key, request.api_version)
        result_type = nested(response_type, "AlterConfigsResourceResponse")
        out = []
        async for resource in each(request.body.resources):
            key = (int(resource.resource_type), resource.resource_name)
            code, message = failed or results.get(key) or _missing(key)
            out.append(
                build(
                    result_type,
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return build(response_type, throttle_time=_NO_THROTTLE, responses=tuple(out))


async def _ops_request(body: Any, replace: bool) -> Any:
    """The controller's IncrementalAlterConfigsRequest of an (Incremental)AlterConfigs body;
    AlterConfigs (`replace`) sets every config it names and drops the rest. Slices count the
    configs across resources (`per_group`): a 1 MB request may name one resource with tens
    of thousands of configs."""
    message = controller_pb2.IncrementalAlterConfigsRequest

    def op(_: Any, c: Any) -> Any:
        # A null value in AlterConfigs: left unset, which the controller refuses.
        return message.Op(
            name=c.name, op=controller_pb2.SET if replace else c.config_operation, value=c.value
        )

    resources = await per_group(
        ((r, r.configs) for r in body.resources),
        op,
        lambda r, ops: message.Resource(
            resource=_resource(r.resource_type, r.resource_name), ops=ops
        ),
    )
    return message(validate_only=body.validate_only, replace=replace, resources=resources)


def _missing(resource: Resource) -> Outcome:
    """A resource the controller's answer left out: a bug, answered rather than dropped."""
    return (
        KafkaErrorCode.unknown_server_error,
        f"The controller's answer has no result for resource {resource}.",
    )


def _entry(
    entry_type: type[Any],
    synonym_type: type[Any],
    e: Any,
    doc: ConfigDoc | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> Any:
    value = None if e.is_sensitive or not e.HasField("value") else e.value
    synonyms = (
        tuple(
            build(
                synonym_type,
                name=s.name,
                value=None if e.is_sensitive or not s.HasField("value") else s.value,
                source=i8(source_id(s.source)),
            )
            for s in e.synonyms
        )
        if include_synonyms
        else ()
    )
    return build(
        entry_type,
        name=e.name,
        value=value,
        read_only=e.read_only,
        config_source=i8(source_id(e.source)),
        is_sensitive=e.is_sensitive,
        synonyms=synonyms,
        config_type=i8(type_id(doc.type if doc else None)),
        documentation=doc.documentation if doc and include_documentation else None,
    )
