"""The coordinators of Kafka's internal topics: the group coordinator (`coordinator.group`,
on `__consumer_offsets`) and, later, the transaction coordinator. Each is a sans-I/O core
and a thin asyncio pump; the broker gives them their partitions to write and read through
`coordinator.partitions.CoordinatorPartitions` and never the other way round
(docs/architecture.md §2 and §6)."""
