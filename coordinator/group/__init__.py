"""The consumer-group coordinator (Kafka's org.apache.kafka.coordinator.group, classic
protocol): the state machine in `core`, its pump in `runtime`, the records of
`__consumer_offsets` in `records` (docs/architecture.md §6)."""
