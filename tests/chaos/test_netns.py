"""The chaos runs' private network (netns.py) stays reachable from the test's namespace when
an earlier run left an interface on the subnet this run would have taken."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.chaos import netns


def test_free_subnet_skips_the_taken_and_wraps_round():
    first = netns.SUBNETS[0]
    assert netns.free_subnet(0, set()) == first
    assert netns.free_subnet(0, {first, first + 1}) == first + 2
    last = netns.SUBNETS[-1]
    assert netns.free_subnet(len(netns.SUBNETS) - 1, {last}) == first
    with pytest.raises(RuntimeError):
        netns.free_subnet(0, set(netns.SUBNETS))


def test_a_stale_interface_on_the_would_be_subnet_is_stepped_round():
    why = netns.available()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)  # CI installs what they need (.ci/run): a missing step
        pytest.skip(why)
    would_take = netns.free_subnet(os.getpid(), netns.subnets_in_use())
    stale = f"sstale{os.getpid() % 10_000}"
    subprocess.run(["ip", "link", "add", stale, "type", "bridge"], check=True, timeout=20)
    try:
        address = f"10.177.{would_take}.253/24"
        subprocess.run(["ip", "addr", "add", address, "dev", stale], check=True, timeout=20)
        subprocess.run(["ip", "link", "set", stale, "up"], check=True, timeout=20)
        network = netns.Network([1, 2])
        try:
            assert network.subnet != would_take
            assert all(netns.unreachable(network.address[node]) is None for node in (1, 2))
        finally:
            network.close()
    finally:
        subprocess.run(["ip", "link", "del", stale], check=False, timeout=20)
