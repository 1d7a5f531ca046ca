"""The APIs and versions this listener serves: one table, which ApiVersions advertises and
the dispatcher (handlers.py) serves, so a client is never offered what is not implemented.
Ranges from docs/kafka_protocol.md ("Strom serves"). An API added here needs its handler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiRange:
    key: int
    name: str  # Kafka's, as in request metrics (kafka.network RequestMetrics request=...)
    min_version: int
    max_version: int

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


API_VERSIONS = 18
METADATA = 3
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

# Served by the connection itself, whose identity they change (server/kafka/sasl_api.py).
CONNECTION_APIS = frozenset((SASL_HANDSHAKE, SASL_AUTHENTICATE))

SERVED: dict[int, ApiRange] = {
    api.key: api
    for api in (
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        # From v0, as Kafka 4 (KIP-896 kept every Metadata version): Debian 12's kcat links
        # librdkafka 2.0.2, which asks for v4 at most; aiokafka for v0-5.
        ApiRange(METADATA, "Metadata", 0, 13),
        # v1 only: v0 sends SASL tokens without Kafka's framing; every client here sends v1.
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 1, 1),
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 1, 2),
    )
}
