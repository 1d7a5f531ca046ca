"""Options the connector does not apply are not taken silently (issue 17): a Spark Kafka
source option Strom knows and ignores is logged with the reason, an unknown one as unknown,
once per process; the options read are not logged."""

from __future__ import annotations

import logging

import pytest

import pyspark_strom.options as options
from pyspark_strom.options import parse_options, parse_write_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(options, "_warned", set())


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_options_read_are_not_logged(caplog):
    parse_options({**BASE, "startingOffsets": "earliest", "failOnDataLoss": "false"})
    parse_write_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"})
    assert warnings(caplog) == []


def test_known_kafka_options_not_applied_are_logged_with_why_once(caplog):
    for _ in range(3):
        parse_options({**BASE, "minOffsetsPerTrigger": "10", "kafka.group.id": "g"})
    logged = warnings(caplog)
    assert len(logged) == 2
    assert "'kafka.group.id' is not applied by the strom source" in logged[0]
    assert "'minoffsetspertrigger' is not applied" in logged[1]


def test_unknown_options_are_logged_as_ignored(caplog):
    parse_options({**BASE, "startingOfsets": "earliest"})
    parse_write_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"})
    assert warnings(caplog) == [
        "Option 'startingofsets' is not an option of the strom source; it is ignored.",
        "Option 'subscribe' is not an option of the strom source; it is ignored.",
    ]


def test_kafka_security_options_are_read_not_warned(caplog, tmp_path):
    from strom.errors import StromError
    from tests.tls_certs import make_certs

    certs = make_certs(str(tmp_path))
    secured = {
        **BASE,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": certs.ca,
        "kafka.ssl.keystore.location": certs.client_keystore,
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    opts = parse_options(secured)
    assert dict(opts.security) == {
        "security_protocol": "SSL",
        "ssl_cafile": certs.ca,
        "ssl_certfile": certs.client_keystore,
        "ssl_check_hostname": False,
    }
    assert parse_write_options({**secured, "topic": "t"}).security == opts.security
    assert warnings(caplog) == [
        "Option 'subscribe' is not an option of the strom source; it is ignored."
    ]
    with pytest.raises(StromError, match="PEM stores only"):
        parse_options({**secured, "kafka.ssl.keystore.type": "JKS"})


def test_kafka_sasl_options_log_in_as_sparks_kafka_source_does(caplog):
    from pyspark_strom.options import client_tls_of
    from strom_api.tls import SaslSecurity

    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="spark" password="spark-secret";'
    )
    opts = parse_options(
        {
            **BASE,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
        }
    )
    security = client_tls_of(opts.security)
    assert isinstance(security, SaslSecurity) and security.tls is None
    assert (security.login.mechanism, security.login.username) == ("SCRAM-SHA-512", "spark")
    assert security.login.password == "spark-secret"
    assert "spark-secret" not in repr(opts.security.__class__) + repr(security)
    assert warnings(caplog) == []  # every kafka.sasl.* option given is read


def test_kafka_producer_options_reach_the_writer_not_the_warnings(caplog):
    from strom.errors import StromError

    written = parse_write_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "topic": "t",
            "kafka.acks": "1",
            "kafka.compression.type": "gzip",
            "kafka.linger.ms": "0",
        }
    )
    assert dict(written.producer) == {"acks": "1", "compression_type": "gzip", "linger_ms": 0}
    assert warnings(caplog) == []
    with pytest.raises(StromError, match="Invalid value soon for configuration linger.ms"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "soon"})
