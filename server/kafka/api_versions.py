"""ApiVersions (key 18, v0-v4): the served table of apis.py, nothing else."""

from __future__ import annotations

import datetime
import re
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i16

from server.kafka.apis import API_VERSIONS, SERVED
from server.kafka.versioned import build, nested

# Kafka's ApiVersionsRequest.isValid (KIP-511): client_software_name and _version, v3+.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_request(request: Any) -> bool:
    """A v3+ request names its client software as Kafka requires (else INVALID_REQUEST)."""
    if request.__version__ < 3:
        return True
    return all(
        _SOFTWARE.fullmatch(value) is not None
        for value in (request.client_software_name, request.client_software_version)
    )


def api_versions_response(version: int, error: KafkaErrorCode = KafkaErrorCode.none) -> Any:
    """The response of `version` (v0 for KIP-511's UNSUPPORTED_VERSION answer). No
    features are listed: Strom finalizes none a Kafka client acts on."""
    response_type = load_response_schema(API_VERSIONS, version)
    entry = nested(response_type, "ApiVersion")
    return build(
        response_type,
        error_code=error,
        api_keys=tuple(
            entry(
                api_key=i16(a.key), min_version=i16(a.min_version), max_version=i16(a.max_version)
            )
            for a in sorted(SERVED.values(), key=lambda a: a.key)
        ),
        throttle_time=datetime.timedelta(0),
    )
