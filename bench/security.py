"""What security costs (issue 18): the same acks=all produce and consume against a PLAINTEXT
cluster and a SASL_SSL one in the same run, and the SASL handshake a client makes on each new
connection.

    python bench/security.py [--quick]

Two clusters of three combined nodes on loopback, both up for the whole run (so each
round of one runs beside the other idle), built and driven by bench/produce_consume.py's
machinery (its Strom, produce_run, consume_run and end_to_end; its client is one grpc.aio
event loop sending pre-serialized ProduceRequests):

- PLAINTEXT: produce_consume.py's cluster as it is.
- SASL_SSL: the broker listener (clients and replica fetches) SASL_SSL with SCRAM-SHA-512
  (the nodes log in as the SCRAM user `broker`, the client as `bench`, both bootstrapped with
  `strom storage format --add-scram`, 4096 iterations, Kafka's default), PLAIN enabled too
  (for the handshake reference); the controller listener SSL with mTLS
  (ssl.client.auth=required). EC P-256 certificates made at run time (tests/tls_certs.py).

1. throughput, ROUNDS rounds alternating which cluster goes first: a fresh topic of 3
   partitions RF 3 (min.insync.replicas=2), acks=all produce of 64-record batches (65 KiB,
   1 KiB records) with IN_FLIGHT requests in flight per partition leader, then 3 FetchStream
   sessions reading it from 0 to its end; MiB/s of the best round, p50/p99 of every produce
   request's round trip (all rounds), CPU per MiB of every process.
2. end to end: acks=all 64-record batches at one rate for both (half the PLAINTEXT peak),
   open loop, 3 long-polling consumers; p50/p99 from send to receipt (end_to_end).
3. handshakes: HANDSHAKES times on a fresh channel (its own TCP connection): the time until
   the channel is ready (TCP + TLS handshake), then one SASL exchange
   (SecurityService.SaslAuthenticate, as strom_api.sasl_client.AioSasl runs it) with
   SCRAM-SHA-512 and with PLAIN (the reference). SCRAM's time includes the client's PBKDF2
   (4096 iterations of HMAC-SHA-512) as a real client pays it.

Goals (the issue): TLS costs at most 25% of acks=all throughput at 64 KiB batches (SASL_SSL
MiB/s >= 0.75 x PLAINTEXT's), a SCRAM handshake under 50 ms (its p99 here). Benchmarks
print, never assert: a missed goal is printed UNMET. The full run takes about 90 s
(--quick about 30 s) and writes under $STROM_BENCH_DIR (default /tmp).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# produce_consume first: it has gRPC run on its posix endpoints before grpc is loaded.
from produce_consume import (  # noqa: E402, I001  (bench/ is not a package)
    E2E_BATCH,
    MIB,
    Run,
    Strom,
    consume_run,
    cpu_per_mib,
    describe_cpu,
    end_to_end,
    make_batch,
    ms,
    pct,
    print_table,
    produce_run,
    row,
)

import grpc  # noqa: E402
import grpc.aio  # noqa: E402
import uvloop  # noqa: E402
from strom_api.sasl_client import AioSasl, SaslLogin  # noqa: E402
from strom_api.tls import ClientTls, SaslSecurity, client_tls, sync_channel  # noqa: E402
from tests.node_integration.node_cluster import NodeCluster  # noqa: E402
from tests.tls_certs import Certs, make_certs  # noqa: E402

SIZES: dict[str, dict[str, Any]] = {
    "full": dict(volume=384 << 20, rounds=3, handshakes=200, e2e_warmup=2.0, e2e_window=10.0),
    "quick": dict(volume=96 << 20, rounds=2, handshakes=100, e2e_warmup=1.0, e2e_window=4.0),
}
BROKER_USER, BROKER_PASSWORD = "broker", "broker-bench-secret"
BENCH_USER, BENCH_PASSWORD = "bench", "bench-bench-secret"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
THROUGHPUT_GOAL = 0.75  # SASL_SSL MiB/s / PLAINTEXT MiB/s
HANDSHAKE_GOAL_S = 0.050


class SaslSslCluster(NodeCluster):
    """Broker listener SASL_SSL (SCRAM-SHA-512 between nodes too), controller listener SSL
    with mTLS; the test helpers' controller calls present the client certificate."""

    def __init__(self, base: str, certs: Certs) -> None:
        self.certs = certs
        self.admin_tls = client_tls(certs.ca, certs.client_keystore)
        super().__init__(
            base,
            3,
            format_args=[
                "--add-scram",
                f"SCRAM-SHA-512=[name={BROKER_USER},password={BROKER_PASSWORD}]",
                "--add-scram",
                f"SCRAM-SHA-512=[name={BENCH_USER},password={BENCH_PASSWORD}]",
            ],
        )

    def _write_config(self, node: int) -> None:
        super()._write_config(node)
        lines = {
            "listeners": f"CLIENT://127.0.0.1:{self.broker_port[node]},"
            f"CONTROLLER://127.0.0.1:{self.controller_port[node]}",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "CLIENT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.certs.node_keystore,
            "ssl.truststore.location": self.certs.ca,
            "listener.name.controller.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.client.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required "
            f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";',
            "listener.name.client.plain.sasl.jaas.config": f"{PLAIN_MODULE} required "
            f'user_{BENCH_USER}="{BENCH_PASSWORD}";',
        }
        with open(self.config_path(node), "a") as f:  # later lines win
            f.writelines(f"{k}={v}\n" for k, v in lines.items())

    def channel(self, target: str) -> grpc.Channel:
        return sync_channel(target, self.admin_tls)


def throughput_round(strom: Strom, runner: asyncio.Runner, label: str, volume: int) -> Run:
    batch = make_batch(E2E_BATCH)
    topic = f"security-{label.lower()}-{time.monotonic_ns()}"
    strom.create_topics([topic])
    leaders = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
    run = Run(-1, E2E_BATCH, len(batch))
    try:
        runner.run(produce_run(strom, topic, leaders, batch, -1, volume, run))
        runner.run(consume_run(strom, topic, leaders, run))
    except Exception as exc:
        if not run.errors:
            run.errors.append(f"{type(exc).__name__}: {exc}")
    strom.delete_topics([topic])
    print(
        f"  {label:<9} produce acks=all {run.bytes / MIB:.0f} MiB in {run.seconds:.2f} s = "
        f"{run.mib_s:.1f} MiB/s, request p50/p99 {ms(pct(run.latencies, 50))}/"
        f"{ms(pct(run.latencies, 99))} ms, {cpu_per_mib(run.cpu, run.cpu_seconds, run.bytes)}; "
        f"consume {run.consume_mib_s:.1f} MiB/s, "
        f"{cpu_per_mib(run.consume_cpu, run.consume_seconds, run.consume_bytes)}; "
        f"{describe_cpu(run.cpu)}" + (f"; FAILED: {run.errors[0]}" if run.errors else "")
    )
    return run


async def handshakes(
    target: str, tls: ClientTls | None, login: SaslLogin | None, count: int
) -> tuple[list[float], list[float]]:
    """(until ready, SASL exchange) seconds of `count` fresh channels to `target`, one at a
    time. (grpc.aio: a blocking channel closed after channel_ready_future can hang in
    close.)"""
    ready: list[float] = []
    exchange: list[float] = []
    credentials = None if tls is None else tls.credentials()
    options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own
    for _ in range(count):
        if credentials is None:
            channel = grpc.aio.insecure_channel(target, options=options)
        else:
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        try:
            started = time.perf_counter()
            await asyncio.wait_for(channel.channel_ready(), 10)
            connected = time.perf_counter()
            ready.append(connected - started)
            if login is not None:
                sasl = AioSasl(login)
                sasl.channel = channel
                await sasl.token()  # one SaslAuthenticate exchange
                exchange.append(time.perf_counter() - connected)
        finally:
            await channel.close()
    return ready, exchange


def best(runs: list[Run]) -> Run | None:
    ok = [r for r in runs if r.seconds and not r.errors]
    return max(ok, key=lambda r: r.mib_s) if ok else None


def cpu_ms_per_mib(run: Run) -> float:
    ours = sum(v for n, v in run.cpu.items() if n not in ("other", "steal"))
    return ours * run.cpu_seconds / (run.bytes / MIB) * 1e3


def report(got: dict[str, Any]) -> None:
    plain, secure = best(got.get("PLAINTEXT", [])), best(got.get("SASL_SSL", []))
    if plain and secure:
        ratio = secure.mib_s / plain.mib_s
        row(
            "produce acks=all, 65 KiB batches: MiB/s (best round)",
            f"{secure.mib_s:.1f}",
            f"{plain.mib_s:.1f}",
            ratio,
            f">= {THROUGHPUT_GOAL:.2f}",
            ratio >= THROUGHPUT_GOAL,
        )
        lat = {n: [x for r in got[n] for x in r.latencies] for n in ("PLAINTEXT", "SASL_SSL")}
        for q in (50, 99):
            ours, ref = pct(lat["SASL_SSL"], q), pct(lat["PLAINTEXT"], q)
            row(
                f"  produce request p{q} at full load",
                f"{ms(ours)} ms",
                f"{ms(ref)} ms",
                ours / ref,
            )
        row(
            "  CPU per MiB, all processes",
            f"{cpu_ms_per_mib(secure):.1f} ms",
            f"{cpu_ms_per_mib(plain):.1f} ms",
            cpu_ms_per_mib(secure) / cpu_ms_per_mib(plain),
        )
        consumed = {
            n: max((r.consume_mib_s for r in got[n] if not r.errors), default=0.0)
            for n in ("PLAINTEXT", "SASL_SSL")
        }
        row(
            "consume from 0, 65 KiB batches: MiB/s (best round)",
            f"{consumed['SASL_SSL']:.1f}",
            f"{consumed['PLAINTEXT']:.1f}",
            consumed["SASL_SSL"] / consumed["PLAINTEXT"] if consumed["PLAINTEXT"] else None,
        )
    e2e = got.get("e2e", {})
    if "PLAINTEXT" in e2e and "SASL_SSL" in e2e:
        rate = e2e["PLAINTEXT"].rate * E2E_BATCH
        for q in (50, 99):
            ours, ref = pct(e2e["SASL_SSL"].latencies, q), pct(e2e["PLAINTEXT"].latencies, q)
            row(
                f"end to end p{q} at {rate:,.0f} records/s",
                f"{ms(ours)} ms",
                f"{ms(ref)} ms",
                ours / ref,
            )
    hs = got.get("handshakes")
    if hs:
        scram, plain_sasl = hs["SCRAM-SHA-512"][1], hs["PLAIN"][1]
        for q in (50, 99):
            ours, ref = pct(scram, q), pct(plain_sasl, q)
            goal = q == 99
            row(
                f"SCRAM-SHA-512 exchange p{q} (PLAIN as reference)",
                f"{ms(ours)} ms",
                f"{ms(ref)} ms",
                ours / ref,
                f"<= {HANDSHAKE_GOAL_S * 1e3:.0f} ms" if goal else "",
                ours <= HANDSHAKE_GOAL_S if goal else None,
            )
        tls_ready, tcp_ready = hs["SCRAM-SHA-512"][0], hs["tcp"]
        for q in (50, 99):
            ours, ref = pct(tls_ready, q), pct(tcp_ready, q)
            row(
                f"new connection ready p{q}: TLS (plaintext as reference)",
                f"{ms(ours)} ms",
                f"{ms(ref)} ms",
                ours / ref,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small volumes, about 30 s")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    size = SIZES[mode]
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    root = tempfile.mkdtemp(prefix="strom-bench-sec-", dir=os.environ.get("STROM_BENCH_DIR"))
    print(
        f"{mode} run in {root}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; two "
        f"clusters of 3 combined nodes (PLAINTEXT; SASL_SSL + SCRAM-SHA-512, controllers over "
        f"mTLS), 3 partitions RF 3, acks=all {E2E_BATCH}-record batches, "
        f"{size['volume'] >> 20} MiB per produce round, {size['rounds']} rounds each"
    )
    wall = time.perf_counter()
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    clusters: dict[str, Strom] = {}
    got: dict[str, Any] = {"PLAINTEXT": [], "SASL_SSL": [], "e2e": {}}
    try:
        certs = make_certs(os.path.join(root, "certs"))
        tls = client_tls(certs.ca)
        scram = SaslLogin("SCRAM-SHA-512", BENCH_USER, BENCH_PASSWORD)
        clusters["PLAINTEXT"] = Strom(os.path.join(root, "plaintext"))
        clusters["SASL_SSL"] = Strom(
            os.path.join(root, "sasl-ssl"),
            SaslSslCluster(os.path.join(root, "sasl-ssl"), certs),
            SaslSecurity(tls, scram),
        )
        time.sleep(1.0)
        print("throughput (rounds alternate which cluster goes first):")
        for i in range(size["rounds"]):
            order = ["PLAINTEXT", "SASL_SSL"] if i % 2 == 0 else ["SASL_SSL", "PLAINTEXT"]
            for name in order:
                got[name].append(throughput_round(clusters[name], runner, name, size["volume"]))
            os.sync()  # no writeback of one round during the next
        peak = best(got["PLAINTEXT"])
        if peak is not None:
            rate = peak.bytes / peak.batch_bytes / peak.seconds / 2
            print(f"end to end at {rate * E2E_BATCH:,.0f} records/s (half the PLAINTEXT peak):")
            for name, strom in clusters.items():
                topic = f"e2e-{name.lower()}"
                strom.create_topics([topic])
                leaders = {p: b for (_, p), (b, _) in strom.leaders([topic]).items()}
                lat = runner.run(
                    end_to_end(strom, topic, leaders, rate, size["e2e_warmup"], size["e2e_window"])
                )
                got["e2e"][name] = lat
                print(
                    f"  {name:<9} sent {lat.sent}, received {lat.received}, {len(lat.errors)} "
                    f"errors; p50/p99/p99.9 {ms(pct(lat.latencies, 50))}/"
                    f"{ms(pct(lat.latencies, 99))}/{ms(pct(lat.latencies, 99.9))} ms; "
                    f"{describe_cpu(lat.cpu)}"
                )
                strom.delete_topics([topic])
        count = size["handshakes"]
        print(f"handshakes, {count} fresh channels each, to node 1:")
        secure_target = clusters["SASL_SSL"].address[1]
        plain_target = clusters["PLAINTEXT"].address[1]
        hs: dict[str, Any] = {}
        hs["tcp"], _ = runner.run(handshakes(plain_target, None, None, count))
        for mechanism in ("SCRAM-SHA-512", "PLAIN"):
            login = SaslLogin(mechanism, BENCH_USER, BENCH_PASSWORD)
            hs[mechanism] = runner.run(handshakes(secure_target, tls, login, count))
        got["handshakes"] = hs
        print(
            f"  plaintext connection ready p50/p99 {ms(pct(hs['tcp'], 50))}/"
            f"{ms(pct(hs['tcp'], 99))} ms"
        )
        for mechanism in ("SCRAM-SHA-512", "PLAIN"):
            ready, exchange = hs[mechanism]
            print(
                f"  {mechanism:<13} TLS connection ready p50/p99 {ms(pct(ready, 50))}/"
                f"{ms(pct(ready, 99))} ms; SASL exchange p50/p99/max {ms(pct(exchange, 50))}/"
                f"{ms(pct(exchange, 99))}/{ms(max(exchange))} ms"
            )
    except Exception as exc:  # a benchmark reports what it has
        print(f"FAILED: {type(exc).__name__}: {exc}")
    finally:
        for strom in clusters.values():
            strom.stop()
        runner.close()
        shutil.rmtree(root, ignore_errors=True)
    report(got)
    print_table()
    print(
        "ratios: SASL_SSL / PLAINTEXT (throughput: higher is better; latency and CPU: lower); "
        f"SCRAM-SHA-512 / PLAIN; TLS / plaintext. Wall time {time.perf_counter() - wall:.0f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
