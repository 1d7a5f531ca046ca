"""NATS JetStream R3 as a reference for bench/clients.py: a 3-node JetStream cluster on
loopback (`nats-server` on the PATH, e.g. Debian's `nats-server` package), a stream with 3
replicas on file storage, and nats-py's async publisher (`publish_async`: a window of
outstanding publishes, each acknowledged by the stream once its replicas have it) sending
1 KiB messages as fast as the client goes.

    python bench/nats_jetstream.py [--messages N]   # alone, prints msgs/s
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

WINDOW = 4000  # nats-py's default publish_async_max_pending


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> str | None:
    """Why the reference cannot run here, or None when it can."""
    if shutil.which("nats-server") is None:
        return "nats-server is not on the PATH (Debian: apt-get install nats-server)"
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py is not installed (pip install -e '.[bench]')"
    return None


class NatsCluster:
    """Three nats-server processes with JetStream, routed to each other."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.client_ports = [free_port() for _ in range(3)]
        cluster_ports = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for i in range(3):
            store = os.path.join(base, f"n{i}")
            os.makedirs(store, exist_ok=True)
            routes = ", ".join(
                f"nats://127.0.0.1:{p}" for j, p in enumerate(cluster_ports) if j != i
            )
            config = os.path.join(base, f"n{i}.conf")
            with open(config, "w", encoding="utf-8") as f:
                f.write(
                    f"server_name: n{i}\n"
                    f"listen: 127.0.0.1:{self.client_ports[i]}\n"
                    f"jetstream {{ store_dir: {store!r} }}\n"
                    f"cluster {{ name: strom-bench, listen: 127.0.0.1:{cluster_ports[i]}, "
                    f"routes: [{routes}] }}\n"
                )
            log = open(os.path.join(base, f"n{i}.log"), "wb")  # noqa: SIM115
            self.procs.append(
                subprocess.Popen(["nats-server", "-c", config], stdout=log, stderr=log)
            )

    def wait_listening(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        for port in self.client_ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"nats-server did not listen on {port}") from None
                    time.sleep(0.1)

    @property
    def servers(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    def pids(self) -> dict[str, int]:
        return {f"nats{i}": p.pid for i, p in enumerate(self.procs)}

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


async def _stream(js: Any, name: str, timeout_s: float = 60) -> None:
    """Creates the R3 file stream once the cluster has a JetStream meta leader."""
    from nats.js.api import StorageType, StreamConfig

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await js.add_stream(
                StreamConfig(name=name, subjects=[name], num_replicas=3, storage=StorageType.FILE)
            )
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def publish_run(servers: list[str], messages: int, size: int = 1024) -> float:
    """Acknowledged messages/s of one async publisher, after a warm-up."""
    import nats

    async def quiet(error: Exception) -> None:  # nats-py logs every error by default
        pass

    nc = await nats.connect(servers=servers, error_cb=quiet)
    try:
        js = nc.jetstream(publish_async_max_pending=WINDOW)
        await _stream(js, "bench")
        payload = bytes((i % 26) + 65 for i in range(size))

        async def publish(count: int) -> None:
            futures = [await js.publish_async("bench", payload) for _ in range(count)]
            await js.publish_async_completed()
            for future in futures:
                future.result()  # raises if the stream refused one

        await publish(min(2000, messages))
        started = time.perf_counter()
        await publish(messages)
        return messages / (time.perf_counter() - started)
    finally:
        await nc.close()


def measure(messages: int, size: int = 1024) -> tuple[float, NatsCluster]:
    """Starts a cluster, measures, stops it; returns msgs/s (and the stopped cluster)."""
    base = tempfile.mkdtemp(prefix="strom-bench-nats-", dir=os.environ.get("STROM_BENCH_DIR"))
    cluster = NatsCluster(base)
    try:
        cluster.wait_listening()
        rate = asyncio.run(publish_run(cluster.servers, messages, size))
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    return rate, cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    args = parser.parse_args()
    why = available()
    if why is not None:
        print(f"skipped: {why}")
        return
    rate, _ = measure(args.messages)
    print(f"NATS JetStream R3, file storage, nats-py publish_async: {rate:,.0f} msgs/s (1 KiB)")


if __name__ == "__main__":
    main()
