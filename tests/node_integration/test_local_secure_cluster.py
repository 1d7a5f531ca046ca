"""`make run-secure` (deploy/local/cluster.py --secure, deploy/local/secure.py): the local
cluster with SASL_SSL clients, mTLS between nodes and an admin user made at format time.
Run as the Makefile runs it; the printed admin client config works with the `strom` tools
(create a topic, produce, consume); a client without TLS, one with TLS but no SASL, and one
with a wrong password are refused; the authorizer is on (a user without ACLs sees no
topic and may not write); the password is kept in 0600 files only; a second
preparation reuses the CA, the certificates and the password; strom-probe (the secured
Kubernetes overlay's exec probe) answers over TLS where a plaintext probe cannot."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time

from node_cluster import FAST, ROOT
from test_local_cluster import LOCAL, MakeRun, free_range

sys.path.insert(0, LOCAL)
import secure  # noqa: E402

from server.health import READY_SERVICE  # noqa: E402

PROBE = os.path.join(ROOT, "deploy", "docker", "probe.py")


def strom(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strom_tools", *args],
        input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=30
    )


def private(path: str) -> bool:
    return stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_make_run_secure_serves_the_admin_config_and_refuses_the_rest(tmp_path):
    directory = str(tmp_path / "secure")
    base = free_range(12)
    metrics = base + 9
    fast = [f"--override={k}={v}" for k, v in FAST.items()]
    run = MakeRun(directory, base, metrics, "--secure", *fast)
    try:
        assert "3 combined nodes, secured" in run.wait_for("is up").string
        bootstrap = run.bootstrap()
        config = run.wait_for(r"admin client config: (\S+)$").group(1)
        run.wait_for("Ctrl-C stops the cluster")
        assert bootstrap.split(",")[1] == f"127.0.0.1:{base + 3}"  # three listeners a node
        connect = ["--bootstrap-server", bootstrap]

        # The admin, a super user, with the printed file and nothing else.
        created = strom("topics", *connect, "--command-config", config, "--create",
                        "--topic", "orders", "--replication-factor", "3")  # fmt: skip
        assert created.returncode == 0, created.stderr
        produced = strom("console-producer", *connect, "--command-config", config,
                         "--topic", "orders", "--producer-property", "acks=all",
                         stdin="one\ntwo\nthree\n")  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        consumed = strom("console-consumer", *connect, "--command-config", config,
                         "--topic", "orders", "--from-beginning", "--max-messages", "3",
                         "--timeout-ms", "40000")  # fmt: skip
        assert consumed.stdout.split() == ["one", "two", "three"], consumed.stderr
        listed = strom("topics", *connect, "--command-config", config, "--list")
        assert "orders" in listed.stdout.split(), listed.stderr

        # The authorizer is on: a user the admin adds, without ACLs, authenticates but sees
        # no topic and may not write (allow.everyone.if.no.acl.found=false).
        added = strom("configs", *connect, "--command-config", config, "--entity-type", "users",
                      "--entity-name", "alice", "--alter",
                      "--add-config", "SCRAM-SHA-512=[password=alice-secret]")  # fmt: skip
        assert added.returncode == 0, added.stderr
        alice = tmp_path / "alice.properties"
        alice.write_text(
            re.sub(r'username="admin" password="[^"]*"',
                   'username="alice" password="alice-secret"', open(config).read())
        )  # fmt: skip
        # Until every broker has replayed her credential, a login may still fail.
        deadline = time.monotonic() + 20
        while (
            seen := strom("topics", *connect, "--command-config", str(alice), "--list")
        ).returncode:
            assert time.monotonic() < deadline, seen.stderr
            time.sleep(0.5)
        assert "orders" not in seen.stdout.split()
        refused = strom("console-producer", *connect, "--command-config", str(alice),
                        "--topic", "orders", stdin="never\n")  # fmt: skip
        assert refused.returncode == 1
        assert "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr

        # No TLS: the TLS listener closes the connection (the tool's last error says
        # "the listener probably expects SSL", unless a loaded machine timed it out first).
        plain = strom("topics", *connect, "--list")
        assert plain.returncode == 1 and "orders" not in plain.stdout
        assert "NETWORK_EXCEPTION" in plain.stderr, plain.stderr
        # TLS but no SASL, and SASL with a wrong password.
        ca = os.path.join(directory, "tls", "ca.pem")
        tls_only = tmp_path / "tls-only.properties"
        tls_only.write_text(f"security.protocol=SSL\nssl.truststore.location={ca}\n")
        refused = strom("topics", *connect, "--command-config", str(tls_only), "--list")
        assert refused.returncode == 1 and "orders" not in refused.stdout
        assert "SASL_AUTHENTICATION_FAILED: listener CLIENT is SASL_SSL" in refused.stderr
        password = open(os.path.join(directory, "admin.password")).read().strip()
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(open(config).read().replace(password, "not-the-password"))
        refused = strom("topics", *connect, "--command-config", str(wrong), "--list")
        assert refused.returncode == 1
        assert "SASL_AUTHENTICATION_FAILED" in refused.stderr, refused.stderr

        # strom-probe over TLS: the client listener (no client certificate needed) and,
        # presenting a node's keystore, the mTLS REPLICATION listener; plaintext fails.
        client_port = bootstrap.split(",")[0].rpartition(":")[2]
        patient = ("--timeout-s", "15")  # the machine may be loaded
        ready = probe("--port", client_port, "--service", READY_SERVICE, "--cafile", ca, *patient)
        assert ready.returncode == 0, ready.stdout
        keystore = os.path.join(directory, "tls", "strom-node-1.pem")
        replication = probe(
            "--port", str(base + 2), "--cafile", ca, "--keystore", keystore, *patient
        )
        assert replication.returncode == 0, replication.stdout
        plaintext = probe("--port", client_port)
        assert plaintext.returncode == 1
        assert plaintext.stdout.startswith(f"strom-probe: 127.0.0.1:{client_port} health ''")

        output = run.stop()
    finally:
        run.kill()
    assert "stopped (exit codes [0, 0, 0])" in output

    # The secret stays in 0600 files: never in a node's config or log.
    assert private(config) and private(os.path.join(directory, "admin.password"))
    for node in (1, 2, 3):
        node_dir = os.path.join(directory, f"node{node}")
        for name in ("server.properties", "server.log"):
            assert password not in open(os.path.join(node_dir, name)).read()
        assert private(os.path.join(directory, "tls", f"strom-node-{node}.pem"))
    # A later run reuses the CA, the certificates and the password.
    files = ["tls/ca.pem", "tls/strom-node-2.pem", "admin.password", "admin-client.properties"]
    before = {f: open(os.path.join(directory, f)).read() for f in files}
    again = secure.prepare(directory, [1, 2, 3])
    assert again.admin_password == password
    assert {f: open(os.path.join(directory, f)).read() for f in files} == before
