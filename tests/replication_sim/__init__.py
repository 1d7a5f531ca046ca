"""Seeded deterministic simulation of replicated partitions (docs/architecture.md §8, layer 2):
1-6 partitions over 1-2 topics on 3-4 brokers, each broker holding its replicas as the real
broker.partition.Partition over the real storage.log.Log files of its LogManager, driven by a
simulated controller quorum (1 or 3 nodes over the simulated Raft of tests/sim, each with the
product's ControllerCore running the real metadata/ functions, crashing and failing over), a
simulated network, the product's replica fetcher, purgatory, ISR, lifecycle and controller
routing cores (broker/), and producers and consumers over every partition, with the
invariants of every partition checked after every event.

    plan.py         what a seed decides           world.py        clock, streams, event loop
    network.py      links, delays, partitions     controller.py   the controller's operations
    quorum.py       the controller nodes, Raft    clients.py      producers and consumers
    broker.py       one broker process
      metadata_pump.py  replicas.py  follower.py  leader.py  isr.py  controller_link.py:
      the pumps of the broker's cores, one module each (broker.py lists them)
    checker.py      the invariants                simulation.py   a seeded run, its phases
    known_bugs.py   unfixed bugs it found         scenarios.py    those bugs as scripted stories

    .venv/bin/python -m tests.replication_sim --seeds N [--start S]
    .venv/bin/python -m tests.replication_sim --seed N --trace
"""
