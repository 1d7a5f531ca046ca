"""deploy/local/certs.py, the CA and node certificates of `make run-secure` (and of the
secured Kubernetes overlay's Secret, deploy/README.md): made once, kept on later runs, made
again when expiring or signed by another CA; the command line adds SANs."""

from __future__ import annotations

import datetime
import os
import stat
import subprocess
import sys
from concurrent import futures

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.deploy.deploy_files import DEPLOY
from tests.tls_certs import local_certs

SCRIPT = DEPLOY / "local" / "certs.py"


def leaf(path: str) -> x509.Certificate:
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


def test_made_once_kept_and_renewed_when_expiring(tmp_path):
    directory = str(tmp_path / "tls")
    made = local_certs.ensure_node_certs(directory, ["strom-node-1", "strom-node-2"])
    first = {p: open(p, "rb").read() for p in [made.ca, *made.keystores.values()]}
    assert stat.S_IMODE(os.stat(os.path.join(directory, "ca-key.pem")).st_mode) == 0o600
    cert = leaf(made.keystores["strom-node-1"])
    assert cert.subject.rfc4514_string() == "CN=strom-node-1"
    assert cert.issuer == leaf(made.ca).subject
    again = local_certs.ensure_node_certs(directory, ["strom-node-1", "strom-node-2"])
    assert {p: open(p, "rb").read() for p in [again.ca, *again.keystores.values()]} == first
    # A certificate about to expire is made again, with the same CA; the other is kept.
    ca_cert = leaf(made.ca)
    with open(os.path.join(directory, "ca-key.pem"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    key = local_certs.new_key()
    short = local_certs.certificate("strom-node-2", key, (ca_cert, ca_key), days=3)
    local_certs.write(
        made.keystores["strom-node-2"], local_certs.key_pem(key) + local_certs.cert_pem(short)
    )
    renewed = local_certs.ensure_node_certs(directory, ["strom-node-1", "strom-node-2"])
    now = datetime.datetime.now(datetime.UTC)
    assert leaf(renewed.keystores["strom-node-2"]).not_valid_after_utc - now > datetime.timedelta(
        days=800
    )
    kept = [renewed.ca, renewed.keystores["strom-node-1"]]
    assert {p: open(p, "rb").read() for p in kept} == {p: first[p] for p in kept}


def test_the_command_line_adds_sans(tmp_path):
    directory = str(tmp_path / "k8s")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), directory, "strom-node",
         "--san", "*.strom.strom.svc.cluster.local", "--san", "10.0.0.7"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = os.path.join(directory, "strom-node.pem")
    assert done.stdout.splitlines() == [f"CA: {directory}/ca.pem", f"strom-node: {path}"]
    sans = leaf(path).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n.value) for n in sans] == [
        "127.0.0.1",
        "localhost",
        "*.strom.strom.svc.cluster.local",
        "10.0.0.7",
    ]


def test_the_kubernetes_secret_names_every_pod_through_its_wildcard(tmp_path):
    # deploy/README.md makes the secured overlay's strom-tls Secret with these SANs: a gRPC
    # client dialling a pod by its headless-Service name accepts the wildcard; another
    # Service's name is refused.
    made = local_certs.ensure_node_certs(
        str(tmp_path), ["strom-node"], [*local_certs.LOOPBACK, "*.strom.strom.svc.cluster.local"]
    )
    pem = open(made.keystores["strom-node"], "rb").read()
    split = pem.index(b"-----BEGIN CERTIFICATE-----")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_secure_port(
        "127.0.0.1:0", grpc.ssl_server_credentials([(pem[:split], pem[split:])])
    )
    server.start()
    ca = open(made.ca, "rb").read()

    def check(name: str) -> bool:
        options = [("grpc.ssl_target_name_override", name)]
        credentials = grpc.ssl_channel_credentials(ca)
        with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options) as channel:
            try:
                health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=5
                )
            except grpc.RpcError:
                return False
        return True

    try:
        assert check("strom-1.strom.strom.svc.cluster.local")
        assert check("127.0.0.1")
        assert not check("strom-1.other.strom.svc.cluster.local")
    finally:
        server.stop(None)
