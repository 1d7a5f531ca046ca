"""The admin tools' argument values, read as Kafka's tools read them (pure functions; a bad
value is an AdminError with Kafka's error name and wording)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from strom.admin_errors import AdminError

MAX_REPLICATION_FACTOR = 32767  # Kafka's Short.MAX_VALUE


def _java_split(text: str, pattern: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped."""
    parts = re.split(pattern, text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """kafka-topics.sh --replica-assignment: partitions separated by commas, each partition's
    brokers by colons (`0:1,1:2` is partition 0 on brokers 0 and 1, partition 1 on 1 and 2);
    the first broker of each is its preferred leader."""
    assignment: dict[int, list[int]] = {}
    for partition, entry in enumerate(_java_split(text, ",")):
        brokers: list[int] = []
        for broker in entry.split(":"):
            try:
                brokers.append(int(broker.strip()))
            except ValueError:
                raise AdminError(
                    "INVALID_REPLICA_ASSIGNMENT",
                    f"Invalid replica assignment '{text}': '{broker.strip()}' is not a broker "
                    "id (use broker ids separated by ':', partitions separated by ',').",
                ) from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise AdminError(
                "INVALID_REPLICA_ASSIGNMENT",
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(str(b) for b in duplicates),
            )
        assignment[partition] = brokers
        if len(brokers) != len(assignment[0]):
            raise AdminError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Partition {partition} has different replication factor: "
                f"[{', '.join(str(b) for b in brokers)}]",
            )
    if not assignment:
        raise AdminError("INVALID_REPLICA_ASSIGNMENT", "The replica assignment is empty.")
    return assignment


def parse_topic_configs(values: Iterable[str]) -> dict[str, str]:
    """kafka-topics.sh --config key=value (repeated); spaces around '=' are ignored."""
    configs: dict[str, str] = {}
    for value in values:
        pair = _java_split(value, r"\s*=\s*")
        if len(pair) != 2:
            raise AdminError(
                "INVALID_CONFIG",
                "requirement failed: Invalid topic config: all configs to be added must be in "
                'the format "key=val".',
            )
        configs[pair[0].strip()] = pair[1].strip()
    return configs


def check_new_topic_counts(partitions: int | None, replication_factor: int | None) -> None:
    """The checks kafka-topics.sh --create makes before asking the controller."""
    if replication_factor is not None and not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise AdminError(
            "INVALID_REPLICATION_FACTOR",
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive",
        )
    if partitions is not None and partitions < 1:
        raise AdminError("INVALID_PARTITIONS", "The partitions must be greater than 0")


class TopicFilter:
    """Kafka's TopicFilter.IncludeList: --topic for --list, --describe, --alter and --delete
    is a regular expression matched against whole names (commas read as '|', spaces and
    surrounding quotes dropped), so `orders` matches only orders and `orders.*` its family."""

    def __init__(self, raw: str) -> None:
        regex = raw.strip().replace(",", "|").replace(" ", "")
        regex = re.sub(r"^[\"']+", "", regex)
        regex = re.sub(r"[\"']+$", "", regex)
        try:
            self.pattern = re.compile(regex)
        except re.error:
            raise AdminError("INVALID_REQUEST", f"{raw} is an invalid regex.") from None
        self.raw = raw

    def matches(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None

    def select(self, names: Sequence[str]) -> list[str]:
        return [n for n in names if self.matches(n)]


def has_collision_chars(name: str) -> bool:
    """Kafka's Topic.hasCollisionChars: '.' or '_', which collide in metric names."""
    return "." in name or "_" in name
