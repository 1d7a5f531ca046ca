"""strom_tools.line_message_reader: console-producer's lines read as Kafka's
LineMessageReader reads them (its properties, its error messages)."""

from __future__ import annotations

import pytest

from strom.errors import StromError
from strom_tools.line_message_reader import LineMessageReader, LineRecord


def test_a_line_is_the_value_unless_told_otherwise():
    assert LineMessageReader({}).read("a\tb:c") == LineRecord(None, b"a\tb:c", [])


def test_keys_and_headers_come_off_the_front_of_the_line():
    reader = LineMessageReader({"parse.key": "true", "parse.headers": "true", "key.separator": "="})
    assert reader.read("h1:v1,h2:v2\tk=v=w") == LineRecord(
        b"k", b"v=w", [("h1", b"v1"), ("h2", b"v2")]
    )
    custom = LineMessageReader(
        {
            "parse.headers": "true",
            "headers.delimiter": "|",
            "headers.separator": ";",
            "headers.key.separator": "=",
        }
    )
    assert custom.read("a=1;b=2|value").headers == [("a", b"1"), ("b", b"2")]


def test_the_null_marker_makes_nulls_but_never_a_null_header_key():
    reader = LineMessageReader(
        {"parse.key": "true", "parse.headers": "true", "null.marker": "<null>"}
    )
    assert reader.read("h:<null>\t<null>\tv") == LineRecord(None, b"v", [("h", None)])
    assert reader.read("<null>\tk\t<null>") == LineRecord(b"k", None, [])
    with pytest.raises(StromError, match="Header keys should not be equal to the null marker"):
        reader.read("<null>:v\tk\tv")
    with pytest.raises(StromError, match="may not be equal"):
        LineMessageReader({"null.marker": "\t"})


def test_a_missing_separator_stops_the_tool_unless_errors_are_ignored():
    strict = LineMessageReader({"parse.key": "true", "parse.headers": "true"})
    strict.read("h:1\tk\tv")
    with pytest.raises(StromError, match="No key separator found on line number 2: 'h:1\tkv'"):
        strict.read("h:1\tkv")
    with pytest.raises(StromError, match="No header key separator found in pair 'h'"):
        strict.read("h\tk\tv")
    lenient = LineMessageReader(
        {"parse.key": "true", "parse.headers": "true", "ignore.error": "true"}
    )
    assert lenient.read("h:1\tkv") == LineRecord(None, b"kv", [("h", b"1")])
    assert lenient.read("h\tk\tv") == LineRecord(b"k", b"v", [("h", None)])
