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

A run killed before `close()` leaves its bridge behind, with its address and its route. A
later run that took the same /24 had two routes to it, and the root namespace's packets went
to the dead bridge: the nodes reached each other but the test reached none of them (a CI run
timed out waiting for its brokers that way). So each run takes a subnet, and names, that no
interface here already has.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterable

SUBNETS = range(10, 250)  # the k of 10.177.k.0/24


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


def _output(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=20).stdout


def subnets_in_use() -> set[int]:
    """The k of every 10.177.k.0/24 that an interface of the root namespace has an address in."""
    addresses = _output("ip", "-o", "-4", "addr", "show")
    return {int(k) for k in re.findall(r"inet 10\.177\.(\d+)\.", addresses)}


def free_subnet(start: int, taken: set[int]) -> int:
    """The first k from `start` on (wrapping round SUBNETS) that `taken` lacks."""
    count = len(SUBNETS)
    for step in range(count):
        k = SUBNETS[(start + step) % count]
        if k not in taken:
            return k
    raise RuntimeError("every subnet of 10.177.0.0/16 that chaos runs use is taken")


def _names_in_use() -> set[str]:
    links = re.findall(r"^\d+: ([^:@]+)", _output("ip", "-o", "link", "show"), re.MULTILINE)
    namespaces = [line.split()[0] for line in _output("ip", "netns", "list").splitlines() if line]
    return {*links, *namespaces}


def unreachable(address: str) -> str | None:
    """None when a TCP connect to a closed port of `address` is refused (the refusal comes
    from the node's namespace), else what happened instead (silence: the packets went
    elsewhere)."""
    with socket.socket() as probe:
        probe.settimeout(2)
        try:
            probe.connect((address, 9))  # nothing listens there
        except ConnectionRefusedError:
            return None
        except OSError as e:
            return str(e) or type(e).__name__
        return "a connection was accepted"


class Network:
    def __init__(self, nodes: Iterable[int]) -> None:
        self.nodes = sorted(nodes)
        names = _names_in_use()
        tag = os.getpid() % 10_000
        while f"sbr{tag}" in names or any(n.startswith(f"strom-{tag}-") for n in names):
            tag = (tag + 1) % 10_000
        self.subnet = free_subnet(os.getpid(), subnets_in_use())
        self.bridge = f"sbr{tag}"
        self.ns = {i: f"strom-{tag}-n{i}" for i in self.nodes}
        self.address = {i: f"10.177.{self.subnet}.{i}" for i in self.nodes}
        self._made: list[str] = []
        try:
            self._build(tag)
            self._check_reachable()
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

    def _check_reachable(self) -> None:
        """Fails now, saying why, rather than leaving the run to time out waiting for nodes
        it cannot reach."""
        for node, address in self.address.items():
            why = unreachable(address)
            if why is not None:
                routes = _output("ip", "-4", "route")
                raise RuntimeError(
                    f"node {node}'s namespace is unreachable at {address} ({why}); "
                    f"routes:\n{routes}"
                )

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
