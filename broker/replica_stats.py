"""The replica manager's request counters, which the metrics layer reads at scrape time
(server/metrics.py): Kafka's BrokerTopicMetrics, one count per partition of a request."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReplicaStats:
    produce_waiting: int = 0
    fetch_waiting: int = 0
    # Per topic, as Kafka's BrokerTopicMetrics (one count per partition of a request).
    bytes_in: dict[str, int] = field(default_factory=dict)
    bytes_out: dict[str, int] = field(default_factory=dict)
    messages_in: dict[str, int] = field(default_factory=dict)
    produce_requests: dict[str, int] = field(default_factory=dict)
    failed_produce_requests: dict[str, int] = field(default_factory=dict)
    fetch_requests: dict[str, int] = field(default_factory=dict)
    failed_fetch_requests: dict[str, int] = field(default_factory=dict)


def count(counter: dict[str, int], topic: str, amount: int = 1) -> None:
    counter[topic] = counter.get(topic, 0) + amount
