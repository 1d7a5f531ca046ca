"""The admin tools' argument values, read as Kafka's tools read them (pure functions; a bad
value is a StromError with Kafka's error name and wording)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from strom.errors import StromError
from strom_api.error_codes import ErrorCode

T = TypeVar("T")

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
                raise StromError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Invalid replica assignment '{text}': '{broker.strip()}' is not a broker "
                    "id (use broker ids separated by ':', partitions separated by ',').",
                ) from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise StromError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(str(b) for b in duplicates),
            )
        assignment[partition] = brokers
        if len(brokers) != len(assignment[0]):
            raise StromError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Partition {partition} has different replication factor: "
                f"[{', '.join(str(b) for b in brokers)}]",
            )
    if not assignment:
        raise StromError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica assignment is empty.")
    return assignment


def parse_topic_configs(values: Iterable[str]) -> dict[str, str]:
    """kafka-topics.sh --config key=value (repeated); spaces around '=' are ignored."""
    configs: dict[str, str] = {}
    for value in values:
        pair = _java_split(value, r"\s*=\s*")
        if len(pair) != 2:
            raise StromError(
                ErrorCode.INVALID_CONFIG,
                "requirement failed: Invalid topic config: all configs to be added must be in "
                'the format "key=val".',
            )
        configs[pair[0].strip()] = pair[1].strip()
    return configs


def check_new_topic_counts(partitions: int | None, replication_factor: int | None) -> None:
    """The checks kafka-topics.sh --create makes before asking the controller."""
    if replication_factor is not None and not 1 <= replication_factor <= MAX_REPLICATION_FACTOR:
        raise StromError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive",
        )
    if partitions is not None and partitions < 1:
        raise StromError(ErrorCode.INVALID_PARTITIONS, "The partitions must be greater than 0")


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
            raise StromError(ErrorCode.INVALID_REQUEST, f"{raw} is an invalid regex.") from None
        self.raw = raw

    def matches(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None

    def select(self, names: Sequence[str]) -> list[str]:
        return [n for n in names if self.matches(n)]


def has_collision_chars(name: str) -> bool:
    """Kafka's Topic.hasCollisionChars: '.' or '_', which collide in metric names."""
    return "." in name or "_" in name


# --- kafka-configs.sh --------------------------------------------------------------------------

# Kafka's ConfigCommand: a comma or '=' counts only outside square brackets.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_CONFIG_KEY = re.compile(r"[$a-zA-Z0-9._-]*")
_ADD_CONFIG_FORMAT = (
    'Invalid entity config: all configs to be added must be in the format "key=val" or  '
    '"key=[val1,val2]" to group values which contain commas.'
)


def _check_config_keys(configs: Iterable[str]) -> None:
    for key in configs:
        if not _CONFIG_KEY.fullmatch(key):
            raise StromError(
                ErrorCode.INVALID_CONFIG, f"Invalid character found for config key: {key}"
            )


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh --add-config: `k1=v1,k2=[v1,v2],k3=v3`. Pairs are separated by
    commas outside square brackets; the brackets group a list value and are dropped
    (`k2=[a,b]` sets k2 to `a,b`); an empty value (`k=`) is kept. A later pair for the same
    key wins, as in Kafka's Properties."""
    pairs = [text] if text == "" else _java_split(text, "," + _OUTSIDE_BRACKETS)
    configs: dict[str, str] = {}
    for pair in pairs:
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, pair)
        if len(parts) != 2:
            raise StromError(ErrorCode.INVALID_CONFIG, _ADD_CONFIG_FORMAT)
        key, value = parts
        configs[key.strip()] = value.replace("[", "").replace("]", "").strip()
    _check_config_keys(configs)
    return configs


_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape_property(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            if following == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_PROPERTY_ESCAPES.get(following, following))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties file, as kafka-configs.sh --add-config-file reads it (Properties.load):
    `#` and `!` comments, `key=value`, `key: value` or `key value`, a backslash at the end of
    a line continuing it, backslash escapes. Values are taken as they are (no brackets)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line goes on
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    configs: dict[str, str] = {}
    for line in logical:
        match = re.match(r"((?:\\.|[^\\=:\s])*)\s*[=:]?\s*(.*)$", line, re.DOTALL)
        assert match is not None  # the pattern matches any line
        configs[_unescape_property(match.group(1))] = _unescape_property(match.group(2))
    _check_config_keys(configs)
    return configs


def parse_delete_config(values: Iterable[str]) -> list[str]:
    """kafka-configs.sh --delete-config k1,k2 (the option may be repeated)."""
    keys: list[str] = []
    for value in values:
        keys += [k.strip() for k in value.split(",") if k.strip()]
    return keys


# --- the JSON files of kafka-leader-election.sh and kafka-reassign-partitions.sh ---------------

TopicPartition = tuple[str, int]


def partition_name(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString: `orders-0`."""
    return f"{tp[0]}-{tp[1]}"


def _java_set(items: Iterable[object]) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


def _duplicates(items: Sequence[T]) -> list[T]:
    seen: set[T] = set()
    duplicates: list[T] = []
    for item in items:
        if item in seen and item not in duplicates:
            duplicates.append(item)
        seen.add(item)
    return duplicates


def _load_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"The {what} is not valid JSON: {exc}"
        ) from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(item: object, name: str, what: str) -> object:
    if not isinstance(item, dict) or name not in item:
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"The {what} has an entry without {name!r}: {item}"
        )
    return item[name]


def _string_field(item: object, name: str, what: str) -> str:
    value = _field(item, name, what)
    if not isinstance(value, str):
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"The {what}'s {name!r} must be a string: {item}"
        )
    return value


def _int_field(item: object, name: str, what: str) -> int:
    value = _field(item, name, what)
    if not _is_int(value):
        raise StromError(
            ErrorCode.INVALID_REQUEST, f"The {what}'s {name!r} must be an integer: {item}"
        )
    assert isinstance(value, int)
    return value


def _list_field(document: object, name: str, what: str, required: bool) -> list[object]:
    if not isinstance(document, dict):
        raise StromError(ErrorCode.INVALID_REQUEST, f"The {what} must be a JSON object.")
    if name not in document:
        if required:
            raise StromError(ErrorCode.INVALID_REQUEST, f'The {what} is missing the "{name}" field')
        return []
    value = document[name]
    if not isinstance(value, list):
        raise StromError(ErrorCode.INVALID_REQUEST, f'The {what}\'s "{name}" must be a JSON array.')
    return value


def _check_version(document: object) -> None:
    version = document.get("version", 1) if isinstance(document, dict) else 1
    if not _is_int(version) or version != 1:
        raise StromError(ErrorCode.INVALID_REQUEST, f"Not supported version field value {version}")


def parse_election_partitions(text: str) -> list[TopicPartition]:
    """kafka-leader-election.sh --path-to-json-file:
    `{"partitions": [{"topic": "foo", "partition": 1}, ...]}`, no partition twice."""
    what = "replica election data"
    document = _load_json(text, what)
    if document is None or document == {}:
        raise StromError(ErrorCode.INVALID_REQUEST, "Replica election data is empty")
    if isinstance(document, dict) and "partitions" not in document:
        raise StromError(
            ErrorCode.INVALID_REQUEST, 'Replica election data is missing "partitions" field'
        )
    partitions = [
        (_string_field(item, "topic", what), _int_field(item, "partition", what))
        for item in _list_field(document, "partitions", what, required=True)
    ]
    duplicates = _duplicates(partitions)
    if duplicates:
        names = _java_set(partition_name(tp) for tp in duplicates)
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"Replica election data contains duplicate partitions: {names}",
        )
    return partitions


RECORDS_TO_DELETE_FORMAT = (
    '{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}'
)


def parse_records_to_delete(text: str, where: str) -> dict[TopicPartition, int]:
    """kafka-delete-records.sh --offset-json-file: each partition's offset (-1: the high
    watermark), in the file's order; no partition twice (`where` names the file)."""
    document = _load_json(text, where)
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise StromError(ErrorCode.INVALID_REQUEST, f"{where}: expected {RECORDS_TO_DELETE_FORMAT}")
    offsets: dict[TopicPartition, int] = {}
    named: list[TopicPartition] = []
    for entry in entries:
        topic = partition = offset = None
        if isinstance(entry, dict):
            topic, partition, offset = (
                entry.get("topic"),
                entry.get("partition"),
                entry.get("offset"),
            )
        if not (isinstance(topic, str) and topic and _is_int(partition) and _is_int(offset)):
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"{where}: each partition needs a topic, a partition and an offset, as "
                f"{RECORDS_TO_DELETE_FORMAT}; not {json.dumps(entry)}",
            )
        assert isinstance(partition, int) and isinstance(offset, int)
        if offset < -1:
            raise StromError(
                ErrorCode.INVALID_REQUEST, f"{where}: offset {offset} of {topic}-{partition}"
            )
        offsets[(topic, partition)] = offset
        named.append((topic, partition))
    duplicates = _duplicates(named)
    if duplicates:
        names = ",".join(partition_name(tp) for tp in duplicates)
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"Offset json file contains duplicate topic partitions: {names}",
        )
    return offsets


def parse_topics_to_move(text: str) -> list[str]:
    """kafka-reassign-partitions.sh --topics-to-move-json-file:
    `{"topics": [{"topic": "foo"}, ...], "version": 1}`, no topic twice."""
    what = "topics-to-move JSON"
    document = _load_json(text, what)
    _check_version(document)
    topics = [
        _string_field(item, "topic", what)
        for item in _list_field(document, "topics", what, required=False)
    ]
    duplicates = _duplicates(topics)
    if duplicates:
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"List of topics to reassign contains duplicate entries: {_java_set(duplicates)}",
        )
    return topics


def parse_reassignment(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """kafka-reassign-partitions.sh --reassignment-json-file: `{"version": 1, "partitions":
    [{"topic": "foo", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}`,
    in file order and with any duplicates (check_reassignment refuses them for --execute).
    Strom moves no replica between log directories: a log_dirs entry other than "any" is
    refused."""
    what = "reassignment JSON"
    document = _load_json(text, what)
    _check_version(document)
    out: list[tuple[TopicPartition, list[int]]] = []
    for item in _list_field(document, "partitions", what, required=False):
        tp = (_string_field(item, "topic", what), _int_field(item, "partition", what))
        replicas = _field(item, "replicas", what)
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"The {what}'s 'replicas' must be a list of broker ids: {item}",
            )
        assert isinstance(item, dict)
        log_dirs = item.get("log_dirs", ["any"] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"The {what}'s 'log_dirs' must be a list of strings: {item}",
            )
        if len(log_dirs) != len(replicas):
            raise StromError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Size of replicas list {_java_set(replicas)} is different from size of log "
                f"dirs list {_java_set(log_dirs)} for partition {partition_name(tp)}",
            )
        moved = [d for d in log_dirs if d != "any"]
        if moved:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"Strom does not move replicas between log directories: the log_dirs of "
                f'partition {partition_name(tp)} must be "any", not {moved[0]!r}.',
            )
        out.append((tp, list(replicas)))
    return out


def check_reassignment(
    parts: Sequence[tuple[TopicPartition, list[int]]],
) -> dict[TopicPartition, list[int]]:
    """What kafka-reassign-partitions.sh --execute requires of the file: some partition, no
    empty replica list, no partition twice, no broker twice in a list."""
    if not parts:
        raise StromError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partition reassignment list cannot be empty"
        )
    if any(not replicas for _, replicas in parts):
        raise StromError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partition replica list cannot be empty"
        )
    duplicates = _duplicates([tp for tp, _ in parts])
    if duplicates:
        names = ",".join(partition_name(tp) for tp in duplicates)
        raise StromError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Partition reassignment contains duplicate topic partitions: {names}",
        )
    repeated = [
        f"{partition_name(tp)} contains multiple entries for "
        + ",".join(str(b) for b in _duplicates(replicas))
        for tp, replicas in parts
        if _duplicates(replicas)
    ]
    if repeated:
        raise StromError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated),
        )
    return dict(parts)


def parse_broker_list(text: str) -> list[int]:
    """kafka-reassign-partitions.sh --broker-list "1,2,3": broker ids, none twice."""
    brokers: list[int] = []
    for entry in text.split(","):
        try:
            brokers.append(int(entry.strip()))
        except ValueError:
            raise StromError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid broker list '{text}': '{entry.strip()}' is not a broker id.",
            ) from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise StromError(
            ErrorCode.INVALID_REQUEST,
            f"Broker list contains duplicate entries: {_java_set(duplicates)}",
        )
    return brokers


def alter_option_given(args: Any) -> str | None:
    """kafka-configs.sh's refusal of a change option given with --describe, or None."""
    for option, given in (
        ("add-config", args.add_config is not None),
        ("add-config-file", args.add_config_file is not None),
        ("delete-config", bool(args.delete_config)),
    ):
        if given:
            return f"option --{option} can only be used with --alter"
    return None


def alter_options_problem(args: Any) -> str | None:
    """kafka-configs.sh's refusal of an --alter with both or neither of the ways to give
    configs, or None."""
    if args.add_config is not None and args.add_config_file is not None:
        return "Only one of --add-config or --add-config-file must be specified"
    if args.add_config is None and args.add_config_file is None and not args.delete_config:
        return (
            "At least one of --add-config, --add-config-file, or --delete-config must be "
            "specified with --alter"
        )
    return None
