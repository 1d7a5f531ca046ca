"""How `strom console-producer` turns a line of input into a record: Kafka's LineMessageReader
and its --property settings.

- parse.key (false), key.separator (a tab): the key is the text before the separator;
- parse.headers (false), headers.delimiter (a tab), headers.separator (","),
  headers.key.separator (":"): headers come first, as `k1:v1,k2:v2<delimiter>`;
- null.marker (unset): a key, value or header value equal to it is null (a header key may
  not be);
- ignore.error (false): a line without a separator it needs is read as if that part were
  absent (a header pair without its key separator: a header with a null value) instead of
  stopping the tool.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.errors import StromError
from strom_api.error_codes import ErrorCode

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: Headers


class LineMessageReader:
    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = props.get("key.separator", "\t")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if not value:
                raise StromError(ErrorCode.INVALID_CONFIG, f"{name} must not be empty")
            if value == self.null_marker:
                raise StromError(
                    ErrorCode.INVALID_CONFIG,
                    f"null.marker and {name} may not be equal",  # Kafka's rule
                )
        self.line_number = 0

    def read(self, line: str) -> LineRecord:
        """The record of one line (without its line end). Raises StromError
        (INVALID_RECORD) for a line it cannot read, unless ignore.error."""
        self.line_number += 1
        headers_text = self._part(self.parse_headers, line, 0, self.headers_delimiter, "headers")
        start = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key_text = self._part(self.parse_key, line, start, self.key_separator, "key")
        if key_text is not None:
            start += len(key_text) + len(self.key_separator)
        headers: Headers = []
        if headers_text is not None and headers_text != self.null_marker:
            headers = self._headers(headers_text, line)
        return LineRecord(self._bytes(key_text), self._bytes(line[start:]), headers)

    def _part(self, enabled: bool, line: str, start: int, separator: str, what: str) -> str | None:
        if not enabled:
            return None
        end = line.find(separator, start)
        if end == -1:
            if self.ignore_error:
                return None
            raise StromError(
                ErrorCode.INVALID_RECORD,
                f"No {what} separator found on line number {self.line_number}: '{line}'",
            )
        return line[start:end]

    def _headers(self, text: str, line: str) -> Headers:
        out: Headers = []
        for pair in text.split(self.headers_separator):
            at = pair.find(self.headers_key_separator)
            if at == -1:
                if self.ignore_error:
                    out.append((pair, None))
                    continue
                raise StromError(
                    ErrorCode.INVALID_RECORD,
                    f"No header key separator found in pair '{pair}' on line number "
                    f"{self.line_number}",
                )
            name = pair[:at]
            if name == self.null_marker:
                raise StromError(
                    ErrorCode.INVALID_RECORD,
                    f"Header keys should not be equal to the null marker '{self.null_marker}' "
                    "as they can't be null",
                )
            out.append((name, self._bytes(pair[at + len(self.headers_key_separator) :])))
        return out

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode()
