"""Who sent the request being served: its principal, the host it came from, and the
listener it came in on — Kafka's RequestContext.principal / clientAddress / listenerName.

The guard in front of every servicer (server/rpc_guard.py) asks the listener's admission
(`Admission.admit`) for the Session of each call before the servicer runs, and sets it for
the call; servicers and the authorizer's callers read it with `current_session()`. A
listener's admission authenticates: on PLAINTEXT every caller is User:ANONYMOUS, on SSL
the verified client certificate names it (server/listener_security.ssl_principal), on
SASL_* the session the client authenticated (issue 18). A caller it refuses never reaches
a servicer.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

# The trailer that tells a SASL client its session is stale: authenticate again.
REAUTHENTICATE = (("strom-sasl-reauthenticate", "1"),)


@dataclass(frozen=True)
class Session:
    principal: str  # Kafka's "Type:name", e.g. User:alice, User:CN=broker-1,O=strom
    host: str  # the client's IP address as the connection shows it ("" when unknown)
    listener: str  # the listener name, e.g. CLIENT, REPLICATION, CONTROLLER
    # When a SASL session ends (wall-clock ms: connections.max.reauth.ms after the exchange,
    # or an OAUTHBEARER token's exp); 0: never. A stream opened in it ends at its first
    # message after that (server/rpc_guard.py), as Kafka closes a connection whose session
    # expired (KIP-368): a call is admitted once, at its start.
    expiry_ms: int = 0

    def expired(self, now_ms: float) -> bool:
        return 0 < self.expiry_ms <= now_ms


_current: ContextVar[Session | None] = ContextVar("strom_request_session", default=None)


def current_session() -> Session | None:
    """The Session of the request being served; None outside a request (the node's own
    work: timers, its metadata loader, tests calling a servicer directly)."""
    return _current.get()


def enter(session: Session) -> Any:
    """Sets the Session for the rest of the running call; returns the token for `leave`."""
    return _current.set(session)


def leave(token: Any) -> None:
    _current.reset(token)


def peer_host(context: Any) -> str:
    """The client's address from gRPC's peer string (ipv4:127.0.0.1:5555,
    ipv6:[::1]:5555); "" when the context has none."""
    try:
        peer = str(context.peer())
    except Exception:  # a context without a peer (a servicer called directly)
        return ""
    if not peer.startswith(("ipv4:", "ipv6:")):
        return ""
    return peer.split(":", 1)[-1].rsplit(":", 1)[0].strip("[]")


class Admission(Protocol):
    """A listener's authentication: the Session of a call, or an abort of it
    (`context.abort(...)`) when the caller is not who it must be."""

    async def admit(self, method: str, context: Any) -> Session: ...
