"""What the fuzzer asserts after each case: every request that is owed an answer got one, in
the order sent, that decodes as its response and holds no UNKNOWN_SERVER_ERROR; a
connection closed on a malformed frame has a log line saying why; the nodes logged no
ERROR and no traceback; and no node stalled: a ping on another connection during the
case, and a Metadata round trip on each node after it, took less than a second."""

from __future__ import annotations

import dataclasses
import re
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from server.kafka.apis import SERVED
from tests.fuzz.checks import tracebacks
from tests.kafka_fuzz.cases import Case, Frame
from tests.kafka_fuzz.connection import CLOSED, DEADLINE, REFUSED, RESET, Exchange, Prober
from tests.kafka_listener.kafka_cluster import decode_response

ANSWER_S = 5.0  # a case's answers, but those to requests that asked the broker to wait
WAIT_S = 1.0  # ... which are waited for this long: enough to see the node stay responsive
STALL_S = 1.0
PING_EVERY_S = 0.02

# What a finding is about; test_kafka_fuzz.py asserts on each kind separately.
CRASH, HANG, STALL, LOGGED = "node exited", "no health", "stall", "error logged"
UNKNOWN, UNANSWERED, UNEXPLAINED = "UNKNOWN_SERVER_ERROR", "unanswered", "closed without a reason"
ORDER, UNDECODABLE = "out of order", "undecodable answer"


@dataclass(frozen=True)
class Problem:
    kind: str
    cause: str  # what the same fault says in every case that shows it (numbers aside)
    detail: str  # what this case showed


def answer_problems(case: Case, ex: Exchange, log: str) -> list[Problem]:
    """Each way the answers on the case's connection break the protocol; `log` is what the
    case's node logged meanwhile."""
    frames = case.frames
    problems: list[Problem] = []
    at = 0  # the next frame owed an answer
    for answer in ex.answers:
        correlation_id = struct.unpack_from(">i", answer)[0] if len(answer) >= 4 else None
        while (
            at < len(frames)
            and frames[at].quiet
            and not frames[at].garbles
            and frames[at].correlation_id != correlation_id
        ):
            at += 1  # an acks=0 Produce is not answered
        if at < len(frames) and frames[at].correlation_id == correlation_id:
            problems += _answer_problems(frames[at], answer)
            at += 1
            continue
        if at < len(frames) and frames[at].garbles:
            return problems  # what follows such a frame is the broker's guess at frames
        due = frames[at].correlation_id if at < len(frames) else "none"
        detail = f"an answer to correlation id {correlation_id} where {due} was due"
        return [*problems, Problem(ORDER, "an answer out of order", detail)]
    if ex.torn and ex.end == CLOSED:
        detail = f"the connection closed {ex.torn} bytes into an answer"
        problems.append(Problem(UNDECODABLE, "a torn answer", detail))
    if at == len(frames) or (at > 0 and frames[at - 1].closes):
        return problems
    for number, frame in enumerate(frames[at:], at + 1):
        if frame.quiet and ex.end != DEADLINE:
            return problems  # the connection may have been closed for it (acks=0, an error)
        if frame.quiet:
            continue
        api = api_name(frame)
        what = f"frame {number} ({frame.kind}: {frame.note[:200]})"
        if ex.end == REFUSED:
            detail = f"the node refused the connection before {what}"
            problems.append(Problem(UNANSWERED, "connection refused", detail))
        elif ex.end == DEADLINE and not frame.waits:
            detail = f"no answer in {ANSWER_S:.0f} s to {what}"
            problems.append(Problem(UNANSWERED, f"{api}: no answer", detail))
        elif ex.end in (CLOSED, RESET) and frame.well_formed:
            why = _close_reason(log, ex, frame) or "no reason logged"
            detail = f"connection {ex.end} instead of answering {what}: {why}"
            problems.append(Problem(UNANSWERED, f"{api}: {why}", detail))
        elif ex.end in (CLOSED, RESET) and not _close_reason(log, ex, frame):
            detail = f"connection {ex.end} after {what}"
            problems.append(Problem(UNEXPLAINED, f"{api} {frame.kind}", detail))
        return problems
    return problems


def api_name(frame: Frame) -> str:
    return SERVED[frame.api_key].name if frame.api_key in SERVED else f"API {frame.api_key}"


def settled(case: Case, answers: list[bytes]) -> bool:
    """Whether every frame owed an answer within ANSWER_S has one: all that are neither
    quiet nor waiting, up to the first that waits (what follows it waits behind it)."""
    got = {struct.unpack_from(">i", a)[0] for a in answers if len(a) >= 4}
    for frame in case.frames:
        if frame.waits:
            return True
        if not frame.quiet and frame.correlation_id not in got:
            return False
    return True


def _answer_problems(frame: Frame, answer: bytes) -> list[Problem]:
    schema = frame.answer_schema
    api = api_name(frame)
    if schema is None:
        detail = f"an answer to a request of API {frame.api_key} v{frame.version}"
        return [Problem(UNDECODABLE, f"{api}: an answer to what is not served", detail)]
    try:
        _, response = decode_response(answer, *schema)
    except Exception as exc:
        detail = f"as API {schema[0]} v{schema[1]}: {type(exc).__name__}: {exc}"[:300]
        return [Problem(UNDECODABLE, f"{api}: {type(exc).__name__}", detail)]
    return [Problem(UNKNOWN, f"{api}: {where}", where) for where in unknown_server_errors(response)]


def _close_reason(log: str, ex: Exchange, frame: Frame) -> str:
    """The node's log line that closed this connection, or ""."""
    marks = (f"to {ex.local} ", f"request {frame.correlation_id} ")
    for line in log.splitlines():
        if "Closing socket connection" in line and any(m in line for m in marks):
            return line.split(": ", 1)[-1][:300]
    return ""


def unknown_server_errors(entity: Any, path: str = "") -> list[str]:
    """Where a decoded response says UNKNOWN_SERVER_ERROR, with the message beside it."""
    found = []
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if value == ErrorCode.unknown_server_error and isinstance(value, ErrorCode):
                message = getattr(entity, "error_message", None) or getattr(entity, "message", None)
                found.append(f"{path}{f.name} (message {message!r})")
            else:
                found += unknown_server_errors(value, f"{path}{f.name}.")
    elif isinstance(entity, tuple):
        for i, item in enumerate(entity):
            found += unknown_server_errors(item, f"{path}{i}.")
    return found


_ERROR_LINE = re.compile(r"^\[[^\]]*\] (ERROR|CRITICAL) (.*)$", re.M)
_FATAL = re.compile(r"^.*(Fatal Python error|panicked at|memory allocation of).*$", re.M)
_NUMBERS = re.compile(r"\d+")


def logged_problems(text: str) -> list[str]:
    """One line per ERROR or CRITICAL record, traceback and fatal error in a node's log;
    numbers become N, so that the same cause reads the same."""
    lines = [
        f"{level} {_NUMBERS.sub('N', rest)[:300]}" for level, rest in _ERROR_LINE.findall(text)
    ]
    lines += [f"traceback {key}" for key in tracebacks(text)]
    lines += [_NUMBERS.sub("N", m.group(0).strip())[:300] for m in _FATAL.finditer(text)]
    return lines


class StallWatch:
    """Pings the node a case is sent to on a connection of its own while the case runs,
    and keeps the longest round trip (a ping still out counts as long as it has been)."""

    def __init__(self, addresses: dict[int, tuple[str, int]]) -> None:
        self.probers = {node: Prober(*address) for node, address in addresses.items()}
        self.lock = threading.Lock()
        self.node: int | None = None
        self.longest = 0.0
        self.out_since: float | None = None
        self.stopping = threading.Event()
        self.armed = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kafka-fuzz-stall-watch", daemon=True)
        self.thread.start()

    def watch(self, node: int) -> None:
        with self.lock:
            self.node, self.longest = node, 0.0
        self.armed.set()

    def stop_watching(self) -> float:
        """The longest ping round trip since watch()."""
        self.armed.clear()
        with self.lock:
            out = 0.0 if self.out_since is None else time.monotonic() - self.out_since
            return max(self.longest, out)

    def _run(self) -> None:
        while not self.stopping.is_set():
            if not self.armed.wait(0.1):
                continue
            with self.lock:
                node, self.out_since = self.node, time.monotonic()
            assert node is not None
            started = time.monotonic()
            try:
                self.probers[node].ping(timeout_s=ANSWER_S)
            except OSError:
                pass  # counted as long as it took; the health check says more
            took = time.monotonic() - started
            with self.lock:
                self.out_since = None
                if node == self.node and self.armed.is_set():
                    self.longest = max(self.longest, took)
            self.stopping.wait(PING_EVERY_S)

    def close(self) -> None:
        self.stopping.set()
        self.armed.set()
        self.thread.join(timeout=ANSWER_S + 1)
        for prober in self.probers.values():
            prober.close()
