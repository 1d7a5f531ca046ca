"""Kafka broker configs that Strom knows and deliberately does not apply, each with the
reason. A server.properties that sets one starts, with a warning naming the key and the
reason (as Kafka warns of keys it does not know), so a Kafka configuration can be reused as
it is without anyone believing the setting took effect. README's "Configuration" section
lists them; tests/test_config_readers.py keeps this list, the log line and README in step.
"""

from __future__ import annotations

_SERVING_MODEL = (
    "one asyncio event loop per node serves every request over gRPC, with disk work in "
    "worker threads; there is no thread pool of this kind to size"
)
_GRPC_SOCKETS = "gRPC owns the sockets and sizes their buffers"
_NO_TRANSACTIONS = "transactions are not implemented yet"

NOT_APPLIED: dict[str, str] = {
    "num.network.threads": _SERVING_MODEL,
    "num.io.threads": _SERVING_MODEL,
    "background.threads": _SERVING_MODEL,
    "num.recovery.threads.per.data.dir": "logs are recovered one at a time at startup",
    "socket.send.buffer.bytes": _GRPC_SOCKETS,
    "socket.receive.buffer.bytes": _GRPC_SOCKETS,
    "transaction.state.log.replication.factor": _NO_TRANSACTIONS,
    "transaction.state.log.min.isr": _NO_TRANSACTIONS,
}


def not_applied_warning(key: str) -> str:
    return f"The configuration '{key}' is Kafka's but Strom does not apply it: {NOT_APPLIED[key]}."
