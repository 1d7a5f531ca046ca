"""Where a new partition's replicas go (docs/architecture.md §5, after Kafka's replica placers).

Brokers are ordered so that racks alternate (the first broker of each rack, then the second
of each, ...), and partition i's replica j goes to the broker at (start + i + j) mod n in
that order: leaders (first replicas) spread evenly, and with racks, a partition's replicas
land on as many different racks as there are. When the next broker's rack is already used
by the partition while another rack is not, the next broker of an unused rack is taken
instead. Only unfenced brokers not shutting down take new replicas. `start` is the caller's
choice (the controller draws it at random, as Kafka does, so topics do not all start on the
same broker); the placement itself is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from metadata.errors import ApiError
from strom_api.error_codes import ErrorCode


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Broker ids with racks alternating: r1's first, r2's first, ..., r1's second, ...
    Brokers without a rack count as one more rack."""
    by_rack: dict[str | None, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack, key=lambda r: (r is None, r or ""))]
    out = []
    for row in range(max((len(c) for c in columns), default=0)):
        out += [c[row] for c in columns if row < len(c)]
    return out


def place(
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start: int = 0,
    first_partition: int = 0,
) -> list[list[int]]:
    """Replica lists for partitions first_partition .. first_partition + partitions - 1 over
    the usable brokers `racks` (broker id -> rack or None)."""
    if partitions < 1:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor < 1:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(racks):
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(racks)} broker(s) are registered.",
        )
    order = rack_alternated(racks)
    rack_count = len(set(racks.values()))
    assignment = []
    for i in range(first_partition, first_partition + partitions):
        replicas: list[int] = []
        used_racks: set[str | None] = set()
        position = start + i
        while len(replicas) < replication_factor:
            broker = _next_broker(order, position, replicas, used_racks, racks, rack_count)
            replicas.append(broker)
            used_racks.add(racks[broker])
            position = order.index(broker) + 1
        assignment.append(replicas)
    return assignment


def _next_broker(
    order: Sequence[int],
    position: int,
    taken: Sequence[int],
    used_racks: set[str | None],
    racks: Mapping[int, str | None],
    rack_count: int,
) -> int:
    """The first broker from `position` on (wrapping) not yet a replica, preferring one of
    a rack the partition does not use while such racks remain."""
    n = len(order)
    candidates = [order[(position + k) % n] for k in range(n)]
    free = [b for b in candidates if b not in taken]
    if len(used_racks) < rack_count:
        for broker in free:
            if racks[broker] not in used_racks:
                return broker
    return free[0]
