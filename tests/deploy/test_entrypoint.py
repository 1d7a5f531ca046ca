"""strom-entrypoint (deploy/docker/entrypoint.py) as a pod runs it: node.id from the pod's
ordinal on first start and from the data directory ever after, a real `strom storage
format`, and one-line errors (no traceback) for a pod set up wrong."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from server import bootstrap_checkpoint
from strom_api.scram_credential import MECHANISM_CODES, client_key, salted_password, stored_key
from tests.deploy.deploy_files import DEPLOY

ENTRYPOINT = DEPLOY / "docker" / "entrypoint.py"


@pytest.fixture
def pod(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'data'}\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "POD_NAME": "strom-2",
        "POD_NAMESPACE": "kafka",
        "NODE_SERVICE": "strom",
        "NODE_ID_OFFSET": "0",
        "STROM_PROCESS_ROLES": "broker,controller",
        "BROKER_PORT": "9092",
        "CONTROLLER_STATEFULSET": "strom",
        "CONTROLLER_SERVICE": "strom",
        "CONTROLLER_REPLICAS": "3",
        "CONTROLLER_PORT": "9093",
        "CONTROLLER_NODE_ID_OFFSET": "0",
        "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
    }
    return config, env


def run(config, env):
    return subprocess.run(
        [sys.executable, str(ENTRYPOINT), "--config", str(config), "--print-env"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def printed(result) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def test_first_start_takes_the_ordinal_and_formats(pod, tmp_path):
    config, env = pod
    settings = printed(run(config, env))
    host = "strom-2.strom.kafka.svc.cluster.local"
    assert settings == {
        "STROM_NODE_ID": "2",
        "STROM_CONTROLLER_QUORUM_VOTERS": ",".join(
            f"{i}@strom-{i}.strom.kafka.svc.cluster.local:9093" for i in range(3)
        ),
        "STROM_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        "STROM_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:9092",
    }
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "node.id=2" in meta and "cluster.id=MkU3OEVBNTcwNTJENDM2Qg" in meta


def test_the_node_id_is_kept_in_the_data_directory(pod):
    config, env = pod
    assert printed(run(config, env))["STROM_NODE_ID"] == "2"
    # Even if the offset changes later (an edited manifest), the disk keeps its node id:
    # Strom refuses a data directory formatted for another node.
    again = printed(run(config, {**env, "NODE_ID_OFFSET": "100"}))
    assert again["STROM_NODE_ID"] == "2"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"POD_NAME": "strom"}, "does not end in a StatefulSet ordinal"),
        ({"CONTROLLER_REPLICAS": "three"}, "CONTROLLER_REPLICAS='three': expected an integer"),
        ({"CLUSTER_ID": ""}, "CLUSTER_ID is not set"),
        ({"CLUSTER_ID": "not-a-uuid"}, "strom storage format failed"),
    ],
)
def test_a_pod_set_up_wrong_gets_one_line(pod, change, message):
    config, env = pod
    result = run(config, {**env, **change})
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_without_access_to_the_api_server_the_rack_is_left_out(pod, capfd):
    # A pod whose service account cannot read nodes (or a cluster without the label) must
    # still start, without broker.rack; the entrypoint says why on stderr.
    spec = importlib.util.spec_from_file_location("strom_entrypoint_zone", ENTRYPOINT)
    assert spec is not None and spec.loader is not None
    entrypoint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entrypoint)
    assert entrypoint.zone({}) is None  # not in Kubernetes at all: nothing to say
    unreachable = {
        "NODE_NAME": "k8s-node-1",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "9",
    }
    assert entrypoint.zone(unreachable) is None
    assert "no broker.rack: cannot read node k8s-node-1" in capfd.readouterr().err
    config, env = pod
    result = run(config, {**env, **unreachable})
    assert "STROM_BROKER_RACK" not in printed(result)


def test_broker_listeners_are_bound_and_advertised_by_name(pod):
    # The secured overlay's CLIENT and REPLICATION listeners; the controller listener takes
    # its name from controller.listener.names.
    config, env = pod
    protocols = (
        "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,KRAFT:PLAINTEXT"
    )
    config.write_text(config.read_text().replace("=CONTROLLER", "=KRAFT") + protocols + "\n")
    settings = printed(run(config, {**env, "BROKER_LISTENERS": "CLIENT:9092,REPLICATION:9094"}))
    host = "strom-2.strom.kafka.svc.cluster.local"
    assert settings["STROM_LISTENERS"] == (
        "CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094,KRAFT://0.0.0.0:9093"
    )
    assert settings["STROM_ADVERTISED_LISTENERS"] == (
        f"CLIENT://{host}:9092,REPLICATION://{host}:9094"
    )
    bad = run(config, {**env, "BROKER_LISTENERS": "CLIENT=9092"})
    assert bad.returncode == 1
    assert "BROKER_LISTENERS='CLIENT=9092': expected NAME:PORT,..." in bad.stderr


def test_the_admin_user_from_the_secret_is_bootstrapped_salted(pod, tmp_path):
    config, env = pod
    secret = tmp_path / "password"
    password = 'p,a]s"s=w[o rd'  # what --add-scram's own syntax could not carry
    secret.write_text(password + "\n")
    found = run(config, {**env, "ADMIN_PASSWORD_FILE": str(secret), "ADMIN_USER": "root"})
    assert found.returncode == 0, found.stderr
    [record] = bootstrap_checkpoint.read(str(tmp_path / "data"))
    assert (record.name, record.mechanism) == ("root", MECHANISM_CODES["SCRAM-SHA-512"])
    salted = salted_password("SCRAM-SHA-512", password.encode(), record.salt, record.iterations)
    assert record.stored_key == stored_key("SCRAM-SHA-512", client_key("SCRAM-SHA-512", salted))
    data = (tmp_path / "data" / bootstrap_checkpoint.FILE_NAME).read_bytes()
    assert password.encode() not in data and b"saltedpassword" not in data
    # A missing or empty Secret file: one line, no node started.
    for path in (str(tmp_path / "missing"), str(tmp_path / "empty")):
        (tmp_path / "empty").write_text("")
        refused = run(config, {**env, "ADMIN_PASSWORD_FILE": path})
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "ADMIN_PASSWORD_FILE" in refused.stderr
