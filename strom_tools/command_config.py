"""`--command-config FILE`, the tools' option for Kafka's client properties (security.protocol,
ssl.*, sasl.*), as kafka-topics.sh and the others take it. The file is read by the client
library (strom/client_properties.py), which the Spark connector shares."""

from __future__ import annotations

import argparse

HELP = (
    "a file of Kafka client properties (security.protocol, ssl.truststore.location, "
    "ssl.keystore.location, ssl.key.password, ssl.endpoint.identification.algorithm, "
    "sasl.mechanism, sasl.jaas.config, sasl.oauthbearer.token.endpoint.url)"
)


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", metavar="FILE", help=HELP)


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server (required) and --command-config, as the console and perf tools
    take them."""
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,...]",
        help="the brokers to connect to",
    )
    add_option(parser)
