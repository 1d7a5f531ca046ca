"""A private network for a chaos run: each node in its own network namespace with its own
address on a bridge, so faults can drop packets between chosen nodes (Jepsen's way), not
just refuse connections.

    net = Network(node_ids)          # namespaces, veths, a bridge; root reaches every node
    net.launcher(i)                  # ["ip", "netns", "exec", ns, ...]: node i runs inside
    net.partition({1}, {2, 3})       # packets between the sides are dropped (iptables DROP)
    net.heal(); net.close()

The addresses are in 10.177.<k>.0/24, inside namespaces this run made (the test's clients
in the root namespace reach the nodes through the bridge; nothing leaves the machine). It
needs root, `ip`, and iptables (Debian's package; .ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable


def available() -> str | None:
    """None when namespaces and iptables work here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=20)


class Network:
    def __init__(self, nodes: Iterable[int]) -> None:
        self.nodes = sorted(nodes)
        tag = os.getpid() % 10_000
        self.subnet = 10 + (os.getpid() % 240)
        self.bridge = f"sbr{tag}"
        self.ns = {i: f"strom-{tag}-n{i}" for i in self.nodes}
        self.address = {i: f"10.177.{self.subnet}.{i}" for i in self.nodes}
        self._made: list[str] = []
        try:
            self._build(tag)
        except BaseException:
            self.close()
            raise

    def _build(self, tag: int) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made.append(f"link:{self.bridge}")
        _run("ip", "addr", "add", f"10.177.{self.subnet}.254/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i in self.nodes:
            ns, outside, inside = self.ns[i], f"sv{tag}n{i}", f"sp{tag}n{i}"
            _run("ip", "netns", "add", ns)
            self._made.append(f"ns:{ns}")
            _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
            self._made.append(f"link:{outside}")
            _run("ip", "link", "set", inside, "netns", ns)
            _run("ip", "link", "set", outside, "master", self.bridge)
            _run("ip", "link", "set", outside, "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            _run(
                "ip",
                "netns",
                "exec",
                ns,
                "ip",
                "addr",
                "add",
                f"{self.address[i]}/24",
                "dev",
                inside,
            )
            _run("ip", "netns", "exec", ns, "ip", "link", "set", inside, "up")

    def launcher(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns[node]]

    def partition(self, *sides: set[int]) -> None:
        """Drops every packet between nodes on different sides (both directions, in each
        node's own namespace); the root namespace (the test's clients) still reaches all."""
        for a_side in sides:
            for b_side in sides:
                if a_side is b_side:
                    continue
                for a in a_side:
                    for b in b_side:
                        self._drop(a, b)

    def _drop(self, node: int, peer: int) -> None:
        ns, address = self.ns[node], self.address[peer]
        _run("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-s", address, "-j", "DROP")
        _run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-d", address, "-j", "DROP")

    def heal(self) -> None:
        for ns in self.ns.values():
            _run("ip", "netns", "exec", ns, "iptables", "-F")

    def close(self) -> None:
        for item in reversed(self._made):
            kind, name = item.split(":", 1)
            command = ("ip", "netns", "del", name) if kind == "ns" else ("ip", "link", "del", name)
            subprocess.run(command, capture_output=True, timeout=20)
        self._made.clear()
