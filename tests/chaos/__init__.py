"""Fault injection against real node processes, with a checker (issue 9).

    python -m tests.chaos --seeds 5 --duration 60 [--nemesis kill,pause] [--topology split]
    make chaos SEEDS=5 DURATION=60 [CLIENTS=confluent]

workload.py   producers, group readers, controller watch, final read
clients.py    the workload's client seam, with Strom's client (gRPC) behind it
kafka_clients.py  confluent-kafka behind the same seam, on the Kafka protocol listeners
nemesis.py    faults and their seeded schedules
netns.py      each node in its own network namespace; partitions drop packets (iptables)
node_faults.py  an LD_PRELOAD shim for slow fsyncs and wall-clock jumps; unflushed data cut
checker.py    lost / duplicated / inconsistent / reordered / vanished / commits backwards /
              two active controllers, and unavailability per fault
secured.py    a secured cluster (SASL_SSL clients, mTLS between nodes, the authorizer on)
run.py        one run: cluster, workload, faults, healing, liveness, final read, report
test_chaos.py the short runs in `make test`
"""
