"""Seeded deterministic simulation of one replicated partition (docs/architecture.md §8,
layer 2): the real broker.partition.Partition replicas over real storage.log.Log
directories, driven by a simulated controller quorum (1 or 3 nodes over the simulated Raft
of tests/sim, each with the product's ControllerCore running the real metadata/ functions,
crashing and failing over), a simulated network, replica fetchers, producers and consumers,
with the invariants checked after every event.

    plan.py        what a seed decides          world.py       clock, streams, event loop
    network.py     links, delays, partitions    controller.py  the controller's operations
    quorum.py      the controller nodes, Raft   controller_calls.py  a broker's path to them
    broker.py      one broker process           clients.py     producers and consumers
    checker.py     the invariants               simulation.py  a seeded run, its phases
    known_bugs.py  unfixed bugs it found        scenarios.py   those bugs as scripted stories

    .venv/bin/python -m tests.replication_sim --seeds N [--start S]
    .venv/bin/python -m tests.replication_sim --seed N --trace
"""
