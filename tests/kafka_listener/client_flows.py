"""What the client-flow tests of the Kafka listener share (test_consumer_group_flows.py,
test_cross_protocol.py): records written by confluent-kafka's idempotent acks=all producer
and what a consumer reads of them, a cooperative-sticky librdkafka group member, and a
group's offsets and description as Strom's own AdminClient (gRPC) sees them."""

from __future__ import annotations

from typing import Any

from strom.admin import AdminClient
from tests.client.cluster_helpers import bootstrap
from tests.kafka_listener.data_helpers import BASE_TS
from tests.kafka_listener.kafka_cluster import KafkaCluster

TIMEOUT = 30


def confluent_produce(cluster: KafkaCluster, topic: str, count: int, partitions: int) -> list[Any]:
    """`count` records through confluent-kafka's idempotent acks=all producer, round-robin
    over the partitions, each with a key, two headers and a timestamp of its own; the
    delivered messages (offsets assigned by the broker)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    delivered: list[Any] = []

    def on_delivery(error, message) -> None:
        assert error is None, error
        delivered.append(message)

    for i in range(count):
        producer.produce(
            topic,
            value=f"value-{i}".encode(),
            key=f"key-{i}".encode(),
            partition=i % partitions,
            headers=[("n", str(i).encode()), ("source", b"confluent")],
            timestamp=BASE_TS + i,
            on_delivery=on_delivery,
        )
    assert producer.flush(TIMEOUT) == 0
    assert len(delivered) == count
    return delivered


def as_written(delivered: list[Any]) -> list[tuple[int, int, bytes, bytes, int, Any]]:
    """What confluent_produce wrote, as a consumer reads it: (partition, offset, key,
    value, timestamp, headers); delivery reports carry no headers, so they are rebuilt."""
    out = []
    for m in delivered:
        i = int(m.key().decode().removeprefix("key-"))
        headers = [("n", str(i).encode()), ("source", b"confluent")]
        out.append((m.partition(), m.offset(), m.key(), m.value(), BASE_TS + i, headers))
    return out


def committed(cluster: KafkaCluster, group: str) -> dict[tuple[str, int], int]:
    with AdminClient(bootstrap(cluster)) as admin:
        return admin.list_consumer_group_offsets(group)


def strom_describe(cluster: KafkaCluster, group: str) -> Any:
    with AdminClient(bootstrap(cluster)) as admin:
        (described,) = admin.describe_consumer_groups([group])
    return described


def confluent_member(cluster: KafkaCluster, group: str, name: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
