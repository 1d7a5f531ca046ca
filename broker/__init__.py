"""Replication (docs/architecture.md §6): partitions and their logs, the replica manager (ISR,
high watermark, the produce and fetch paths), the follower fetch session, ISR proposals, the
broker's lifecycle with the controller, producer state and log maintenance."""
