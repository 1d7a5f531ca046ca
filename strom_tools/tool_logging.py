"""Where the command-line tools send the clients' log: warnings and worse on stderr, one line
each, as Kafka's tools-log4j.properties has it ("[time] WARN message (logger)"). Only the
client tools call it (`strom server` sets up its own logging)."""

from __future__ import annotations

import logging
import sys


def log_warnings_to_stderr() -> None:
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )
