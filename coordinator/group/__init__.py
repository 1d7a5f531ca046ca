"""The consumer-group coordinator's state and the records of `__consumer_offsets`
(Kafka's org.apache.kafka.coordinator.group; docs/architecture.md §6)."""
