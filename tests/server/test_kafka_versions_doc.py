"""docs/kafka_protocol.md's table says, per API, the versions Strom serves and why; the
listener serves (and ApiVersions advertises) server/kafka/apis.py's table. The two agree:
every API served is in the document, with the range served."""

from __future__ import annotations

import re
from pathlib import Path

from server.kafka.apis import SERVED

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka_protocol.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \|(?:[^|]*\|){5} ([^|]*)\|$", re.MULTILINE)


def documented() -> dict[int, tuple[str, str]]:
    """key -> (API name, the "Strom serves" cell's range, e.g. "0-13" or "2")."""
    found = {}
    for key, name, cell in ROW.findall(DOC.read_text()):
        served = re.match(r"\s*(\d+(?:-\d+)?)", cell)
        if served is not None:
            found[int(key)] = (name, served.group(1))
    return found


def test_every_api_served_is_documented_with_its_range_and_no_other():
    doc = documented()
    served = {
        api.key: (
            api.name,
            f"{api.min_version}"
            if api.min_version == api.max_version
            else f"{api.min_version}-{api.max_version}",
        )
        for api in SERVED.values()
    }
    assert set(served) <= set(doc), "an API served that the document does not list"
    # The document may list APIs planned but not served yet; the served ones agree.
    assert {k: v for k, v in doc.items() if k in served} == served
