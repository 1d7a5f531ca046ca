"""A seeded fuzzer for every RPC of every gRPC service a Strom node serves (issue 16).

    python -m tests.fuzz --seed S --cases N [--service X] [--case N]
    make fuzz SEED=S CASES=N [SERVICE=X]

services.py  the RPCs of both listeners, from the generated descriptors; raw-bytes calls
values.py    field values biased to boundaries and to names the cluster knows
messages.py  random messages from descriptors; field- and byte-level mutations
batches.py   RecordBatch v2 poisoned after the header or with lying headers, CRC valid
seeds.py     a few well-formed requests per RPC, what mutations start from
cases.py     case n of seed s, rebuilt from the two numbers alone
cluster.py   the 3-node cluster of real node processes and its topics
checks.py    health within 1 s, snapshots for "a refused request changes nothing", log
             growth, tracebacks, stored batches that decode
run.py       one run and its findings
test_fuzz.py the fixed-seed run of `make test`
"""
