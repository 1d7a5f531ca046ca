"""`meta.properties`: which cluster and node a log directory belongs to (KRaft, version 1).

    version=1
    cluster.id=<22-character base64url UUID>
    node.id=<int>
    directory.id=<22-character base64url UUID, unique per directory>

Written once by `strom storage format`; every start checks that each log directory is
formatted, and that all of them name the same cluster and this node, as Kafka does, so a
disk moved from another node or cluster is refused instead of silently served.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from storage.errors import LogDirError
from storage.file_io import atomic_write, remove_leftover_temp
from storage.names import uuid_string

FILE_NAME = "meta.properties"
VERSION = 1


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = VERSION


def random_uuid() -> str:
    """A Kafka-style id: a random UUID as unpadded base64url, never starting with '-'."""
    while True:
        text = uuid_string(uuid.uuid4().bytes)
        if not text.startswith("-"):
            return text


_BASE64URL = re.compile(r"^[A-Za-z0-9_-]{22}$")


def check_uuid(text: str, what: str) -> None:
    raw = b""
    if _BASE64URL.match(text):  # urlsafe_b64decode would also take '+' and '/'
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            pass
    if len(raw) != 16:
        raise LogDirError(f"{what} '{text}' is not a base64url-encoded UUID of 22 characters")


def read(directory: str) -> MetaProperties | None:
    path = os.path.join(directory, FILE_NAME)
    remove_leftover_temp(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise LogDirError(f"{path} is not a text properties file") from None
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    try:
        meta = MetaProperties(
            cluster_id=props["cluster.id"],
            node_id=int(props["node.id"]),
            directory_id=props["directory.id"],
            version=int(props["version"]),
        )
    except (KeyError, ValueError) as exc:
        raise LogDirError(f"{path} is missing or has a bad value for {exc}") from None
    if meta.version != VERSION:
        raise LogDirError(f"{path} has version {meta.version}; only version 1 (KRaft) is supported")
    return meta


def write(directory: str, meta: MetaProperties) -> None:
    os.makedirs(directory, exist_ok=True)
    text = (
        f"version={meta.version}\ncluster.id={meta.cluster_id}\n"
        f"node.id={meta.node_id}\ndirectory.id={meta.directory_id}\n"
    )
    atomic_write(os.path.join(directory, FILE_NAME), text.encode())


def format_dirs(
    directories: Sequence[str], cluster_id: str, node_id: int, ignore_formatted: bool = False
) -> list[str]:
    """Writes meta.properties into each directory; returns those it formatted. A directory
    already formatted is an error unless `ignore_formatted` (Kafka's --ignore-formatted)."""
    check_uuid(cluster_id, "cluster id")
    formatted = []
    for directory in directories:
        if read(directory) is not None:
            if ignore_formatted:
                continue
            raise LogDirError(
                f"log directory {directory} is already formatted; use --ignore-formatted "
                f"to skip formatted directories"
            )
        write(directory, MetaProperties(cluster_id, node_id, random_uuid()))
        formatted.append(directory)
    return formatted


def check_dirs(directories: Sequence[str], node_id: int) -> str:
    """Checks every directory belongs to one cluster and to `node_id`; returns the cluster id."""
    cluster_ids = {}
    directory_ids: dict[str, str] = {}
    for directory in directories:
        meta = read(directory)
        if meta is None:
            raise LogDirError(
                f"no {FILE_NAME} in {directory}: format it first with "
                f"`strom storage format --cluster-id <id> --config <server.properties>`"
            )
        if meta.node_id != node_id:
            raise LogDirError(
                f"{directory} belongs to node.id {meta.node_id}, but this node is {node_id}"
            )
        if meta.directory_id in directory_ids:
            raise LogDirError(
                f"{directory} and {directory_ids[meta.directory_id]} have the same directory.id"
            )
        directory_ids[meta.directory_id] = directory
        cluster_ids[directory] = meta.cluster_id
    if len(set(cluster_ids.values())) > 1:
        listing = ", ".join(f"{d}: {c}" for d, c in cluster_ids.items())
        raise LogDirError(f"log directories belong to different clusters: {listing}")
    return next(iter(cluster_ids.values()))
