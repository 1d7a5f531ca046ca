"""The idempotent producer's window, which Strom's producer and its brokers must agree on.

Kafka's leader remembers a producer's last 5 batches of each partition (Kafka's
ProducerStateEntry.NUM_BATCHES_TO_RETAIN): its Java producer puts one batch of a partition in
a request and keeps at most max.in.flight.requests.per.connection = 5 requests unanswered,
so every batch it may have to send again is one the leader still knows, and a retry of a
batch already written is answered with its offsets instead of being written twice.

A leader's cost is per request, not per batch (strom/produce_requests.py), so Strom's
producer lets a partition have 5 batches unanswered for each request it may have in flight
(in however many requests they go: usually one), and its brokers remember WINDOW_BATCHES =
5 x 5 batches per producer and partition. At Kafka's default batch.size of 16 KiB that is
400 KiB of a partition in flight rather than 80 KiB: acks=all produce at the default
settings is bound by that amount per round trip (README.md, "The client library").
Kafka's clients on the Kafka listener find the 5 batches they need among the 25.
"""

MAX_IN_FLIGHT_IDEMPOTENT = 5  # max.in.flight.requests.per.connection's bound with idempotence
BATCHES_PER_IN_FLIGHT_REQUEST = 5  # a partition's unanswered batches per request allowed
WINDOW_BATCHES = MAX_IN_FLIGHT_IDEMPOTENT * BATCHES_PER_IN_FLIGHT_REQUEST
