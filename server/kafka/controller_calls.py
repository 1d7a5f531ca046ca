"""A Kafka admin request's call to the active controller (through the gRPC forwarder's
authorized path, server/controller_forwarder.py), with the refusal of the request as a
whole read from the answer: what acl_admin.py, scram_admin.py and cluster_admin.py share."""

from __future__ import annotations

from typing import Any

from server.controller_forwarder import ControllerCall, NotForwarded
from server.kafka.controller_answers import NO_ERROR, Outcome, not_forwarded, whole_outcome


async def forward(call: ControllerCall, method: str, pb_request: Any) -> tuple[Any, Outcome | None]:
    """The controller's answer, or (None, why) when the request failed as a whole (no
    controller answered: REQUEST_TIMED_OUT; a ControllerError: its code and message)."""
    try:
        response = await call(method, pb_request)
    except NotForwarded as exc:
        return None, not_forwarded(exc.error_name, str(exc))
    whole = whole_outcome(response)
    if whole is not None and whole != NO_ERROR:
        return None, whole
    return response, None
