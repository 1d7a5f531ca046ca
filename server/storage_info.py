"""`strom storage info`, after kafka-storage.sh info: what the node's directories (log.dirs
and metadata.log.dir) hold before it starts: which exist, the meta.properties they share,
and what is wrong (not formatted, not a directory, another cluster's or node's)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from storage import meta_properties
from storage.errors import LogDirError


def storage_info(directories: Sequence[str], out: Callable[[str], None] = print) -> int:
    """Kafka's StorageTool.infoCommand: 0 when every directory is formatted for one cluster
    and node, else 1 with the problems listed."""
    if not directories:
        out("No directories specified.")
        return 0
    problems: list[str] = []
    found: list[str] = []
    first: meta_properties.MetaProperties | None = None
    for directory in sorted(set(directories)):
        if not os.path.isdir(directory):
            exists = os.path.exists(directory)
            problems.append(f"{directory} {'is not a directory' if exists else 'does not exist'}")
            continue
        found.append(directory)
        try:
            meta = meta_properties.read(directory)
        except LogDirError as exc:
            problems.append(f"Error loading {meta_properties.FILE_NAME} of {directory}: {exc}")
            continue
        if meta is None:
            problems.append(f"{directory} is not formatted.")
            continue
        if first is None:
            first = meta
        elif meta.cluster_id != first.cluster_id:
            problems.append("Mismatched cluster IDs between storage directories.")
        elif meta.node_id != first.node_id:
            problems.append("Mismatched node IDs between storage directories.")
    if found:
        out("Found log directory:" if len(found) == 1 else "Found log directories:")
        for directory in found:
            out(f"  {directory}")
        out("")
    if first is not None:
        out(
            f"Found metadata: {{cluster.id={first.cluster_id}, directory.id={first.directory_id}, "
            f"node.id={first.node_id}, version={first.version}}}"
        )
        out("")
    if not problems:
        return 0
    out("Found problem:" if len(problems) == 1 else "Found problems:")
    for problem in problems:
        out(f"  {problem}")
    out("")
    return 1
