"""Which TCP endpoints gRPC's core uses in Strom's own processes (nodes and the `strom`
tools): the posix ones of its iomgr, not the EventEngine ones that recent grpcio releases
enable for Python by default (1.85 here). Strom's replication, produce and fetch streams
move many messages of tens of kilobytes, and there the EventEngine endpoints cost more CPU
per message (docs/architecture.md §9): on this project's 2-core machines, a grpc.aio
stream round trip of a 100-byte request and a 64 KiB answer cost the client 249-319 us of
CPU and the server 215-265 us with them, 217-219 and 145-195 us without; a node's CPU per
acks=all batch (64 KiB, RF 3, 150 batches/s) fell 11% (7.40 -> 6.57 ms in all three
nodes).

gRPC reads GRPC_EXPERIMENTS once, when `grpc` is first imported, so this runs from
strom_tools/__init__.py before anything imports it. An operator's own GRPC_EXPERIMENTS is
left as it is. A gRPC release without these experiments logs "Unknown experiment" once and
runs as it would have anyway. The client library (`strom`) leaves a user's process alone:
an application sets GRPC_EXPERIMENTS itself for the same effect.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

VARIABLE = "GRPC_EXPERIMENTS"
# "-name" turns an experiment off: clients' and servers' endpoints from the posix iomgr.
POSIX_ENDPOINTS = "-event_engine_client,-event_engine_listener"


def prefer_posix_endpoints(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Sets GRPC_EXPERIMENTS for the posix endpoints unless it is set already; returns
    whether it did. It must run before `grpc` is imported: after, only the processes this
    one starts would take it."""
    if VARIABLE in environ:
        return False
    environ[VARIABLE] = POSIX_ENDPOINTS
    return True
