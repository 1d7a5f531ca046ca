"""A seeded fuzzer for the Kafka wire protocol of a Strom node's KAFKA listener
(server/kafka/), after tests/fuzz's for its gRPC services.

    python -m tests.kafka_fuzz --seed S --cases N [--case K] [--api NAME,...]
    make kafka-fuzz SEED=S CASES=N [API=NAME,...]

wire.py       request frames from kio's schemas, as pieces a mutation rewrites one at a time
seeds.py      a well-formed request of any served API and version, naming what the cluster has
values.py     field values at the boundaries of their Kafka types
mutations.py  values, unknown tagged fields, rewritten lengths and counts, damaged bytes
cases.py      case k of seed s, rebuilt from the two numbers alone: one frame or several
              pipelined, each with what the broker owes it
cluster.py    the 3-node cluster with KAFKA listeners (tests/kafka_listener's KafkaCluster)
connection.py a case's frames on one connection, its answers; ping round trips
checks.py     answers owed, in order, decodable, no UNKNOWN_SERVER_ERROR; closes with a
              reason; no ERROR or traceback logged; no node stalled or gone
run.py        one run and its findings
test_kafka_fuzz.py the fixed-seed run of `make test`
"""
