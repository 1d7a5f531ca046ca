"""The connector's options, parsed and checked once, named as Spark's Kafka source names them.

Spark hands a data source its options with their keys as the user typed them; Spark's own
sources treat keys case-insensitively, and so does `parse_read_options`. Every bad value
raises StromError INVALID_CONFIG with one sentence naming the option, what it must be and
what it was.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strom.client_properties import KNOWN as SECURITY_PROPERTIES
from strom.client_properties import PRODUCER_PROPERTIES, producer_settings, settings_from_properties
from strom.cluster import parse_bootstrap
from strom.errors import StromError
from strom.fetcher import EARLIEST, LATEST, TopicPartition
from strom.security import client_security
from strom_api.error_codes import ErrorCode
from strom_api.tls import ChannelSecurity

BOOTSTRAP_KEYS = ("strom.bootstrap.servers", "kafka.bootstrap.servers")
TIMEOUT_KEYS = ("strom.request.timeout.ms", "kafka.request.timeout.ms")
FETCH_BYTES_KEYS = ("strom.max.partition.fetch.bytes", "kafka.max.partition.fetch.bytes")

# Spark's Kafka source passes kafka.* options to its consumer; these are the security ones
# (PEM stores only), taken with the names --command-config reads.
SECURITY_KEYS = {"kafka." + key for key in SECURITY_PROPERTIES}

# Every option a read or a write looks at, lower-cased as Spark's sources compare them.
_COMMON_KEYS = {*BOOTSTRAP_KEYS, *TIMEOUT_KEYS, *SECURITY_KEYS}
READ_KEYS = _COMMON_KEYS | {
    *FETCH_BYTES_KEYS,
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "minpartitions",
    "maxrecordsperpartition",
    "maxoffsetspertrigger",
    "failondataloss",
    "includeheaders",
}
# Spark's Kafka sink passes kafka.* options to its producer: these reach the writer's
# Producer (acks, compression.type, linger.ms, ...) over the connector's own defaults.
PRODUCER_KEYS = {"kafka." + key for key in PRODUCER_PROPERTIES} - set(TIMEOUT_KEYS)
WRITE_KEYS = _COMMON_KEYS | PRODUCER_KEYS | {"topic"}
# Options Spark itself sets or reads (a file path, a streaming query's checkpoint).
_SPARKS_OWN = {"path", "checkpointlocation"}

_OWN_FETCHES = "the connector's reads are Strom fetches bounded by strom.request.timeout.ms"
_NO_GROUP = (
    "the connector keeps its offsets in Spark's checkpoint and joins no consumer group "
    "(Spark's Kafka source only names the group it would use)"
)
_EVERY_TRIGGER = "each trigger reads what is there, up to maxOffsetsPerTrigger"
# Options of Spark's Kafka source that this connector knows and does not apply, with why:
# a query written for Kafka runs unchanged, and the log says what did not take effect.
NOT_APPLIED = {
    "kafkaconsumer.polltimeoutms": _OWN_FETCHES,
    "fetchoffset.numretries": _OWN_FETCHES,
    "fetchoffset.retryintervalms": _OWN_FETCHES,
    "groupidprefix": _NO_GROUP,
    "kafka.group.id": _NO_GROUP,
    "minoffsetspertrigger": _EVERY_TRIGGER,
    "maxtriggerdelay": _EVERY_TRIGGER,
}

# Kafka client options Spark's Kafka source and sink refuse (KafkaSourceProvider's
# validateGeneralOptions / validateSinkOptions, IllegalArgumentException), refused here
# in its words: a query that Spark's Kafka connector rejects is not run with them dropped.
_USE_STARTING_OFFSETS = (
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest' to specify "
    "where to start."
)
REFUSED_READ = {
    "kafka.auto.offset.reset": f"Kafka option 'auto.offset.reset' is not supported. "
    f"{_USE_STARTING_OFFSETS}",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are "
    "always deserialized as byte arrays. Use DataFrame operations to explicitly deserialize "
    "the keys.",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported, as values "
    "are always deserialized as byte arrays. Use DataFrame operations to explicitly "
    "deserialize the values.",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported. This is "
    "unnecessary because the source keeps its offsets in the query's checkpoint.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
}
REFUSED_WRITE = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported, as keys are "
    "serialized as byte arrays. Use DataFrame operations to explicitly serialize the keys "
    "into either strings or byte arrays.",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported, as values "
    "are serialized as byte arrays. Use DataFrame operations to explicitly serialize the "
    "values into either strings or byte arrays.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
}

log = logging.getLogger(__name__)
_warned: set[str] = set()


def _refuse(opts: Mapping[str, str], refused: Mapping[str, str]) -> None:
    for key in sorted(set(opts) & set(refused)):
        raise invalid(refused[key])


def _warn_unapplied(opts: Mapping[str, str], read: set[str]) -> None:
    """Logs, once per process and option, every option given that this read or write does
    not apply (Spark itself passes unknown options through silently)."""
    for key in sorted(set(opts) - read - _SPARKS_OWN - _warned):
        _warned.add(key)
        if key in NOT_APPLIED:
            log.warning(
                "Option '%s' is not applied by the strom source: %s.", key, NOT_APPLIED[key]
            )
        else:
            log.warning("Option '%s' is not an option of the strom source; it is ignored.", key)


def invalid(message: str) -> StromError:
    return StromError(ErrorCode.INVALID_CONFIG, message)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: `kind` is earliest, latest, offsets (per partition, -2 and
    -1 meaning earliest and latest), timestamp (one for every partition) or timestamps (per
    partition)."""

    kind: str
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = -1


# The clients' security keyword arguments (strom/security.py), as picklable pairs: Spark
# sends the options to its executors.
Security = tuple[tuple[str, Any], ...]


def security_settings(opts: Mapping[str, str]) -> Security:
    props = {k[len("kafka.") :]: v for k, v in opts.items() if k in SECURITY_KEYS}
    return tuple(sorted(settings_from_properties(props, "the strom source's options").items()))


def client_tls_of(security: Security) -> ChannelSecurity:
    """The TLS a reader or writer dials with (None: PLAINTEXT)."""
    return client_security(**dict(security))


@dataclass(frozen=True)
class Options:
    bootstrap: str
    request_timeout_ms: int
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"  # error | latest
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    fetch_bytes: int = 4 * 1024 * 1024  # per Fetch of a task (max.partition.fetch.bytes)
    security: Security = ()


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise invalid(f"option '{name}' must be true or false, not {text!r}")


def _positive(opts: dict[str, str], name: str) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise invalid(f"option '{name}' must be a positive integer, not {text!r}")
    return value


def _bootstrap(opts: dict[str, str]) -> str:
    bootstrap = next((opts[k] for k in BOOTSTRAP_KEYS if opts.get(k)), None)
    if bootstrap is None:
        raise invalid(
            "option 'strom.bootstrap.servers' (or 'kafka.bootstrap.servers') must be given "
            "as host:port[,host:port...]"
        )
    try:
        parse_bootstrap(bootstrap)
    except StromError as exc:
        raise invalid(f"option 'strom.bootstrap.servers': {exc.message}") from None
    return bootstrap


def _timeout(opts: dict[str, str]) -> int:
    for key in TIMEOUT_KEYS:
        if key in opts:
            return _positive(opts, key) or 30_000
    return 30_000


def _timestamp(text: str, name: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise invalid(f"option '{name}' must be a timestamp in ms since the epoch, not {text!r}")
    return value


def _json_object(text: str, name: str, example: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise invalid(f"option '{name}' must be JSON like {example}, not {text!r}")
    return value


def _per_partition(text: str, name: str, example: str) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(text, name, example).items():
        if not isinstance(parts, dict):
            raise invalid(f"option '{name}' must be JSON like {example}, not {text!r}")
        for partition, value in parts.items():
            try:
                tp = TopicPartition(str(topic), int(partition))
                out[tp] = int(value)
            except (TypeError, ValueError):
                message = f"option '{name}' must be JSON like {example}, not {text!r}"
                raise invalid(message) from None
    return out


def _offsets(opts: dict[str, str], name: str, default: str, streaming: bool) -> OffsetSpec:
    """startingOffsets / endingOffsets and their timestamp forms (the timestamp wins, as in
    Spark: ...Timestamp, then ...OffsetsByTimestamp, then ...Offsets)."""
    side = "starting" if name == "startingOffsets" else "ending"
    single = opts.get(f"{side}timestamp")
    if single is not None:
        return OffsetSpec("timestamp", timestamp=_timestamp(single, f"{side}Timestamp"))
    by_ts = opts.get(f"{side}offsetsbytimestamp")
    if by_ts is not None:
        key = f"{side}OffsetsByTimestamp"
        stamps = _per_partition(by_ts, key, '{"topic":{"0":1700000000000}}')
        for stamp in stamps.values():
            _timestamp(str(stamp), key)
        return OffsetSpec("timestamps", offsets=stamps)
    text = opts.get(name.lower(), default).strip()
    word = text.lower()
    if word in ("earliest", "latest"):
        if (side, word) in (("starting", "latest"), ("ending", "earliest")) and not streaming:
            raise invalid(f"option '{name}' cannot be {word} for a batch query")
        return OffsetSpec(word)
    example = '{"topic":{"0":23,"1":-2}}' if side == "starting" else '{"topic":{"0":50,"1":-1}}'
    offsets = _per_partition(text, name, example)
    forbidden = EARLIEST if side == "ending" else (LATEST if not streaming else None)
    for tp, offset in offsets.items():
        if offset < EARLIEST or offset == forbidden:
            allowed = "-1 (latest)" if side == "ending" else "-2 (earliest)"
            if streaming:
                allowed = "-2 (earliest) or -1 (latest)"
            raise invalid(
                f"option '{name}' has offset {offset} for {tp.topic}-{tp.partition}: give an "
                f"offset >= 0 or {allowed}"
            )
    return OffsetSpec("offsets", offsets=offsets)


def parse_options(options: Mapping[str, str], streaming: bool = False) -> Options:
    """The options of a read, checked."""
    opts = _lower(options)
    _refuse(opts, REFUSED_READ)
    _warn_unapplied(opts, READ_KEYS)
    bootstrap = _bootstrap(opts)
    request_timeout_ms = _timeout(opts)

    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise invalid(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"given, not {len(given)}"
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise invalid("option 'subscribe' must name at least one topic, as topic1,topic2")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise invalid(f"option 'subscribePattern' is not a regular expression: {exc}") from None
    else:
        example = '{"topicA":[0,1],"topicB":[2,4]}'
        parsed = _json_object(opts["assign"], "assign", example)
        tps = []
        for topic, parts in parsed.items():
            if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
                text = opts["assign"]
                raise invalid(f"option 'assign' must be JSON like {example}, not {text!r}")
            tps += [TopicPartition(topic, p) for p in parts]
        if not tps:
            raise invalid("option 'assign' must name at least one partition")
        assign = tuple(tps)

    if streaming and any(
        k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    ):
        raise invalid("option 'endingOffsets' (and its timestamp forms) is for batch queries only")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise invalid(
            f"option 'startingOffsetsByTimestampStrategy' must be error or latest, not {strategy!r}"
        )
    return Options(
        bootstrap=bootstrap,
        request_timeout_ms=request_timeout_ms,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=_offsets(
            opts, "startingOffsets", "latest" if streaming else "earliest", streaming
        ),
        ending=(
            OffsetSpec("latest") if streaming else _offsets(opts, "endingOffsets", "latest", False)
        ),
        by_timestamp_strategy=strategy,
        min_partitions=_positive(opts, "minPartitions"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        fetch_bytes=next(
            (_positive(opts, k) or 0 for k in FETCH_BYTES_KEYS if k in opts), 4 * 1024 * 1024
        ),
        security=security_settings(opts),
    )


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    request_timeout_ms: int
    topic: str | None
    security: Security = ()
    producer: tuple[tuple[str, Any], ...] = ()  # the Producer's keyword arguments from kafka.*


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _lower(options)
    _refuse(opts, REFUSED_WRITE)
    _warn_unapplied(opts, WRITE_KEYS)
    bootstrap = _bootstrap(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise invalid("option 'topic' must not be empty")
    producer = producer_settings(
        {k[len("kafka.") :]: v for k, v in opts.items() if k in PRODUCER_KEYS}
    )
    return WriteOptions(
        bootstrap, _timeout(opts), topic, security_settings(opts), tuple(sorted(producer.items()))
    )
