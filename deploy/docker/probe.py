"""strom-probe: a Kubernetes exec probe that asks the node in its own pod grpc.health.v1
over TLS, for listeners that Kubernetes' gRPC probes cannot reach.

    strom-probe [--port 9092] [--service strom.ready] [--cafile /etc/strom/tls/ca.crt]
        [--keystore /etc/strom/tls/tls-combined.pem] [--timeout-s 4]

Kubernetes' built-in gRPC probe speaks plaintext only (it has no TLS settings), so on a
secured node (deploy/k8s/overlays/secured, every listener TLS) it would fail its handshake
and restart healthy pods. This asks the same two services the gRPC probes ask (broker/
health.py: "" for liveness and startup, strom.ready for readiness) on 127.0.0.1:PORT with
TLS when --cafile is given, trusting that CA. Health needs no SASL login (it answers on a
SASL_SSL listener before any handshake) and no client certificate on a listener with
ssl.client.auth=none; on an mTLS listener pass --keystore (PEM key + chain) to present one.
The probe dials 127.0.0.1 while the node's certificate names its DNS names, so the host
name is not checked; the chain still is.

Exit code 0 when the answer is SERVING; 1 otherwise, with one line on stdout saying what
was answered (the kubelet shows it in the pod's events).
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strom_api.tls import ClientTls, TlsConfigError, client_tls, sync_channel


def check(port: int, service: str, tls: ClientTls | None, timeout_s: float) -> str | None:
    """None when SERVING, else what the node answered (or why it did not)."""
    with sync_channel(f"127.0.0.1:{port}", tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"{error.code().name}: {error.details()}"
    if answer.status == health_pb2.HealthCheckResponse.SERVING:
        return None
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--service", default="", help='"" (liveness) or strom.ready')
    parser.add_argument("--cafile", help="the CA certificate (PEM): dial with TLS")
    parser.add_argument("--keystore", help="PEM key + chain to present (mTLS listeners)")
    parser.add_argument("--timeout-s", type=float, default=4.0)
    args = parser.parse_args(argv)
    tls = None
    if args.cafile is not None:
        try:
            tls = client_tls(args.cafile, args.keystore, check_hostname=False)
        except TlsConfigError as exc:
            print(f"strom-probe: {exc}")
            return 1
    why = check(args.port, args.service, tls, args.timeout_s)
    if why is not None:
        print(f"strom-probe: 127.0.0.1:{args.port} health {args.service!r}: {why}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
