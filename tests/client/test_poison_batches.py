"""Issue 16's poison batches against a real 3-node cluster, through the raw gRPC Produce: a
61-byte batch claiming 2^31-1 records and a valid CRC over random record bytes are refused
with INVALID_RECORD, the log end does not move on any replica, and consumers, ListOffsets by
time included, go on reading the partition."""

from __future__ import annotations

import os
import time

from strom_api.v1 import client_pb2
from tests.broker.test_log_validator import forge
from tests.client.cluster_helpers import create_topic, reader
from tests.data_plane.data_client import batch, error_name


def offset_for(client, leader: int, topic: str, timestamp: int):
    request = client_pb2.ListOffsetsRequest(
        topics=[
            client_pb2.ListOffsetsRequest.Topic(
                name=topic,
                partitions=[
                    client_pb2.ListOffsetsRequest.Partition(partition=0, timestamp=timestamp)
                ],
            )
        ]
    )
    return client.stub(leader).ListOffsets(request, timeout=5).topics[0].partitions[0]


def replica_ends(client, topic: str) -> dict[int, int]:
    """Each replica's high watermark as it reads its own copy (replica_id -2)."""
    return {
        broker: client.fetch_raw(broker, topic, 0, 0, replica_id=-2).high_watermark
        for broker in client.addresses
    }


def test_poison_batches_are_refused_and_the_log_end_stays(cluster):
    topic = "poison"
    create_topic(cluster, topic, partitions=1)
    client = reader(cluster)
    leader = client.leader(topic, 0)
    first = client.produce_raw(leader, topic, 0, batch([b"a", b"b"]))
    assert first.error.code == 0 and first.base_offset == 0, first
    now = int(time.time() * 1000)
    poison = {
        "count 2^31-1 over no records": forge(b"", 2**31 - 1, base_timestamp=now),
        "random record bytes": forge(os.urandom(200), 3, base_timestamp=now),
    }
    for name, data in poison.items():
        answer = client.produce_raw(leader, topic, 0, data)
        assert error_name(answer.error) == "INVALID_RECORD", (name, answer)
        assert answer.error.message and answer.base_offset == -1, (name, answer)
    # The next good batch takes offset 2: the log end did not move.
    after = client.produce_raw(leader, topic, 0, batch([b"c"]))
    assert after.error.code == 0 and after.base_offset == 2, after
    assert [r.value for r in client.read_all(topic, 0)] == [b"a", b"b", b"c"]
    deadline = time.monotonic() + 20
    while replica_ends(client, topic) != dict.fromkeys(client.addresses, 3):
        assert time.monotonic() < deadline, replica_ends(client, topic)
        time.sleep(0.1)
    by_time = offset_for(client, leader, topic, 0)  # the first record at or after time 0
    assert by_time.error.code == 0 and by_time.offset == 0, by_time
