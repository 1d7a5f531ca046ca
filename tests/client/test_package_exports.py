"""`from strom import Producer, Consumer, AdminClient, TopicPartition`, as kafka-python users
write `from kafka import KafkaProducer, ...`; the names are the classes themselves, and a
plain `import strom` (what `strom server` starts with) loads none of the client library."""

from __future__ import annotations

import subprocess
import sys

import pytest

import strom
from strom.admin import AdminClient
from strom.consumer import Consumer
from strom.fetcher import TopicPartition
from strom.producer import Producer


def test_the_clients_import_from_the_package():
    from strom import AdminClient as A
    from strom import Consumer as C
    from strom import Producer as P
    from strom import TopicPartition as T

    assert (P, C, A, T) == (Producer, Consumer, AdminClient, TopicPartition)
    assert sorted(strom.__all__) == sorted(strom._EXPORTS)
    for name in strom.__all__:
        assert getattr(strom, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'KafkaProducer'"):
        strom.KafkaProducer  # noqa: B018


def test_importing_the_package_loads_no_client_module():
    code = "import sys, strom; print(sorted(m for m in sys.modules if m.startswith('strom.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr
