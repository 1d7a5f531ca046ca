"""The coordinators of Kafka's internal topics: the group coordinator (`coordinator.group`,
on `__consumer_offsets`) and, later, the transaction coordinator (docs/architecture.md §2)."""
