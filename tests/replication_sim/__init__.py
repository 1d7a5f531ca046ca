"""Seeded deterministic simulation of one replicated partition (docs/architecture.md §8,
layer 2): the real broker.partition.Partition replicas over real storage.log.Log
directories, driven by a simulated controller (the real metadata/ functions over a real
MetadataImage), a simulated network, replica fetchers, producers and consumers, with the
invariants checked after every event.

    plan.py        what a seed decides          world.py       clock, streams, event loop
    network.py     links, delays, partitions    controller.py  the controller's operations
    broker.py      one broker process           clients.py     producers and consumers
    checker.py     the invariants               simulation.py  a seeded run, its phases
    known_bugs.py  unfixed bugs it found        scenarios.py   those bugs as scripted stories

    .venv/bin/python -m tests.replication_sim --seeds N [--start S]
    .venv/bin/python -m tests.replication_sim --seed N --trace
"""
