"""A consumer-group member in its own process, for the tests that kill one: it joins,
polls, and prints one JSON line per event (its assignment, each record it processed, each
commit), so the test sees exactly what it did before the kill.

    python -m tests.client.group_member BOOTSTRAP GROUP TOPIC [--manual-commit] [--instance ID]
"""

from __future__ import annotations

import argparse
import json
import sys

from strom.consumer import Consumer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--manual-commit", action="store_true")
    parser.add_argument("--instance")
    parser.add_argument("--strategy", default="range")
    args = parser.parse_args()

    def say(**event: object) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    class Listener:
        def on_partitions_revoked(self, partitions):
            say(revoked=[list(tp) for tp in partitions])

        def on_partitions_assigned(self, partitions):
            say(assigned=[list(tp) for tp in consumer.assignment()])

    consumer = Consumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance,
        auto_offset_reset="earliest",
        enable_auto_commit=not args.manual_commit,
        auto_commit_interval_ms=200,
        session_timeout_ms=3000,
        heartbeat_interval_ms=300,
        partition_assignment_strategy=[args.strategy],
    )
    consumer.subscribe([args.topic], listener=Listener())
    while True:
        for records in consumer.poll(timeout_ms=200).values():
            for r in records:
                say(record=[r.partition, r.offset, r.value.decode()])
        if args.manual_commit:
            consumer.commit()
            say(
                committed={
                    f"{tp.partition}": off for tp, off in consumer._fetcher.positions.items()
                }
            )


if __name__ == "__main__":
    main()
