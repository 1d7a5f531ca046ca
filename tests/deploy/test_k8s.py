"""deploy/k8s: `kubectl kustomize` renders both overlays; every rendered object validates
against Kubernetes 1.32's schemas (kubernetes-validate --strict, offline); and what each pod
will run agrees with the manifests: strom-entrypoint's computation (deploy/docker/
entrypoint.py) is run for every pod of every StatefulSet with the environment the manifests
give it, and server/server_config.py loads the result, as the pod will."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from server import bootstrap_checkpoint
from server.health import READY_SERVICE
from server.node import CONTROLLED_SHUTDOWN_TIMEOUT_S
from server.server_config import ServerConfig, load
from tests.deploy.deploy_files import DEPLOY, RULES, tool

K8S = DEPLOY / "k8s"
OVERLAYS = ["combined", "split", "secured"]
CUSTOM_RESOURCES = {"PodMonitor", "PrometheusRule"}  # Prometheus Operator: no 1.32 schema


def render(overlay: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [tool("kubectl"), "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def load_module(name: str, path: Any) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


entrypoint = load_module("strom_entrypoint", DEPLOY / "docker" / "entrypoint.py")
DOCKERFILE = (DEPLOY / "docker" / "Dockerfile").read_text()
IMAGE_VENV = re.search(r"python -m venv (\S+)", DOCKERFILE).group(1)
IMAGE_ENTRYPOINT = re.search(r"^COPY deploy/docker/entrypoint.py (\S+)$", DOCKERFILE, re.M).group(1)
IMAGE_PROBE = re.search(r"^COPY deploy/docker/probe.py (\S+)$", DOCKERFILE, re.M).group(1)


def kubernetes_validate(path: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-k", "1.32.0", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_validate_against_kubernetes_1_32(overlay, tmp_path):
    docs = render(overlay)
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = kubernetes_validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    passed = result.stdout.count(" passed for resource ")
    assert passed == len([d for d in docs if d["kind"] not in CUSTOM_RESOURCES])
    # Only the Prometheus Operator's kinds go unchecked here (test_prometheus_rule_...).
    unchecked = {
        line.split(" kind ")[1].split()[0]
        for line in result.stdout.splitlines()
        if "Couldn't find schema" in line
    }
    assert unchecked == CUSTOM_RESOURCES


def test_validation_rejects_an_unknown_field(tmp_path):
    # --strict really checks: a misspelt field fails.
    path = tmp_path / "bad.yaml"
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"publishNotReadyAdresses": True},
    }
    path.write_text(yaml.safe_dump(service))
    assert kubernetes_validate(path).returncode != 0


def test_prometheus_rule_carries_the_tested_rules():
    generator = load_module("strom_prometheus_rule", K8S / "prometheus_rule.py")
    committed = (K8S / "base" / "prometheus-rule.yaml").read_text()
    assert committed == generator.render(), "run: python deploy/k8s/prometheus_rule.py"
    for overlay in OVERLAYS:
        [rule] = [d for d in render(overlay) if d["kind"] == "PrometheusRule"]
        assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


# --- what the pods will run ---------------------------------------------------------------


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class Pod:
    """One pod of a rendered StatefulSet, with the environment and config it will run with."""

    def __init__(
        self, docs: list[dict[str, Any]], sts: dict[str, Any], ordinal: int, tmp_path: Any
    ) -> None:
        self.sts = sts
        self.name = f"{sts['metadata']['name']}-{ordinal}"
        self.namespace = sts["metadata"]["namespace"]
        template = sts["spec"]["template"]
        self.labels = template["metadata"]["labels"]
        self.spec = template["spec"]
        [self.container] = self.spec["containers"]
        self.ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        config_maps = by_kind(docs, "ConfigMap")
        env = {}
        for source in self.container.get("envFrom", []):
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
        fields = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "spec.nodeName": "k8s-node-1",
        }
        for item in self.container["env"]:
            if "valueFrom" in item:
                env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                env[item["name"]] = item["value"]
        self.env = env
        mounts = {m["name"]: m["mountPath"] for m in self.container["volumeMounts"]}
        [config_volume] = [v for v in self.spec["volumes"] if v["name"] == "config"]
        config_text = config_maps[config_volume["configMap"]["name"]]["data"]["server.properties"]
        # The image's venv python runs the entrypoint where the Dockerfile put it.
        assert self.container["command"] == [
            f"{IMAGE_VENV}/bin/python",
            IMAGE_ENTRYPOINT,
            "--config",
            f"{mounts['config']}/server.properties",
        ]
        self.data_mount = mounts["data"]
        self.config_text = config_text
        self.settings = entrypoint.plan(env, config_text, None)
        path = tmp_path / f"{self.name}.properties"
        path.write_text(config_text)
        self.config: ServerConfig = load(str(path), [], {**env, **self.settings})

    @property
    def fqdn(self) -> str:
        service = self.sts["spec"]["serviceName"]
        return f"{self.name}.{service}.{self.namespace}.svc.cluster.local"


def pods(docs: list[dict[str, Any]], tmp_path: Any) -> list[Pod]:
    return [
        Pod(docs, sts, i, tmp_path)
        for sts in by_kind(docs, "StatefulSet").values()
        for i in range(sts["spec"]["replicas"])
    ]


@pytest.mark.parametrize(
    ("overlay", "controllers", "brokers"), [("combined", 3, 3), ("split", 3, 3), ("secured", 3, 3)]
)
def test_voters_ports_and_probes_agree_with_the_pods_config(
    overlay, controllers, brokers, tmp_path
):
    docs = render(overlay)
    all_pods = pods(docs, tmp_path)
    services = by_kind(docs, "Service")
    statefulsets = by_kind(docs, "StatefulSet")
    voter_pods = [p for p in all_pods if p.config.is_controller]
    broker_pods = [p for p in all_pods if p.config.is_broker]
    assert (len(voter_pods), len(broker_pods)) == (controllers, brokers)
    ids = [p.config.node_id for p in all_pods]
    assert len(set(ids)) == len(ids), ids
    for pod in all_pods:
        config = pod.config
        assert config.unknown == (), f"{pod.name}: unknown keys {config.unknown}"
        # Every pod has the same voters: exactly the controller pods, at their names and
        # controller ports, through a headless Service that publishes not-ready pods.
        assert dict(config.voters) == {
            v.config.node_id: f"{v.fqdn}:{v.ports['controller']}" for v in voter_pods
        }
        # It binds every interface on ports the container declares; a broker advertises
        # its own stable name.
        for listener in config.listeners.values():
            assert listener.host == "0.0.0.0"
            assert listener.port in pod.ports.values()
        if config.is_broker:
            assert config.broker_listeners[0].port == pod.ports["client"]
            # Every broker listener advertised at the pod's own name.
            assert [(a.name, a.host, a.port) for a in config.advertised_listeners] == [
                (x.name, pod.fqdn, x.port) for x in config.broker_listeners
            ]
        if config.is_controller:
            assert config.listeners["CONTROLLER"].port == pod.ports["controller"]
        service = services[pod.sts["spec"]["serviceName"]]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert selects(service["spec"]["selector"], pod.labels)
        assert {p["targetPort"] for p in service["spec"]["ports"]} == set(pod.ports)
        # Probes ask grpc.health.v1 on a port the node serves it on: the client listener of
        # a broker, the controller listener of a controller-only node.
        probe_port = pod.ports["client"] if config.is_broker else pod.ports["controller"]
        for probe, service_name in [
            ("startupProbe", ""),
            ("livenessProbe", ""),
            ("readinessProbe", READY_SERVICE),
        ]:
            if overlay == "secured":
                assert_tls_probe(pod, pod.container[probe], probe_port, service_name)
            else:
                assert pod.container[probe]["grpc"] == {"port": probe_port, "service": service_name}
        assert config.metrics_port == pod.ports["metrics"]
        assert config.log_dirs[0].startswith(pod.data_mount + "/")
        # SIGTERM comes after preStop; the controlled shutdown must fit in the grace period.
        pre_stop = pod.container["lifecycle"]["preStop"]["sleep"]["seconds"]
        assert pod.spec["terminationGracePeriodSeconds"] >= (
            pre_stop + CONTROLLED_SHUTDOWN_TIMEOUT_S + 10
        )
        assert pod.spec["enableServiceLinks"] is False  # no STROM_*_SERVICE_HOST variables
        assert pod.spec["securityContext"]["runAsUser"] == 10001  # the Dockerfile's USER
        anti = pod.spec["affinity"]["podAntiAffinity"]
        terms = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert pod.container["resources"]["requests"]["cpu"]
    for name, sts in statefulsets.items():
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        [budget] = [
            b
            for b in by_kind(docs, "PodDisruptionBudget").values()
            if b["spec"]["selector"] == sts["spec"]["selector"]
        ]
        assert budget["spec"]["maxUnavailable"] == 1, name
        assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["data"]
    # The bootstrap Service reaches the brokers and nothing else.
    bootstrap = services["strom-bootstrap"]["spec"]
    reached = [p for p in all_pods if selects(bootstrap["selector"], p.labels)]
    assert {p.name for p in reached} == {p.name for p in broker_pods}
    assert all(bootstrap["ports"][0]["targetPort"] in p.ports for p in reached)
    # The PodMonitor scrapes every pod's metrics port.
    [monitor] = by_kind(docs, "PodMonitor").values()
    assert all(selects(monitor["spec"]["selector"]["matchLabels"], p.labels) for p in all_pods)
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


# --- the secured overlay ------------------------------------------------------------------


def mounted_secret(pod: Pod, path: str) -> tuple[str, str]:
    """(Secret name, key) of the file at `path` in the pod: a mounted Secret volume."""
    for mount in pod.container["volumeMounts"]:
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory):
            assert "subPath" not in mount  # a subPath mount never sees a renewed Secret
            [volume] = [v for v in pod.spec["volumes"] if v["name"] == mount["name"]]
            key = path[len(directory) :]
            items = {i["path"]: i["key"] for i in volume["secret"].get("items", [])}
            return volume["secret"]["secretName"], items.get(key, key)
    raise AssertionError(f"{pod.name}: nothing mounted at {path}")


def assert_tls_probe(pod: Pod, probe: dict[str, Any], port: int, service: str) -> None:
    """An exec probe: strom-probe, where the Dockerfile puts it, asking `service` over TLS
    on `port`, trusting the truststore the node's client listener uses."""
    assert "grpc" not in probe
    command = probe["exec"]["command"]
    assert command[:2] == [f"{IMAGE_VENV}/bin/python", IMAGE_PROBE]
    options = dict(zip(command[2::2], command[3::2], strict=True))
    assert options.get("--service", "") == service
    assert int(options["--port"]) == port
    listener = pod.config.broker_listeners[0].name
    assert options["--cafile"] == pod.config.tls[listener].truststore.path
    # The probe answers within the kubelet's timeout.
    assert float(options["--timeout-s"]) + 5 <= probe["timeoutSeconds"]


def test_secured_overlay_listeners_certificates_admin_and_authorizer(tmp_path):
    docs = render("secured")
    assert "Certificate" not in {d["kind"] for d in docs}  # cert-manager stays optional
    cert_manager = (K8S / "overlays" / "secured" / "cert-manager.yaml").read_text()
    certificates = by_kind(list(yaml.safe_load_all(cert_manager)), "Certificate")
    node_cert = certificates["strom-tls"]["spec"]
    for pod in pods(docs, tmp_path):
        config = pod.config
        assert dict(config.protocols) == {
            "CLIENT": "SASL_SSL",
            "REPLICATION": "SSL",
            "CONTROLLER": "SSL",
        }
        assert config.replica.inter_broker_listener == "REPLICATION"
        assert config.sasl["CLIENT"].mechanisms == ("SCRAM-SHA-512",)
        # mTLS between nodes, TLS without client certificates for SASL clients.
        assert {n: t.client_auth for n, t in config.tls.items()} == {
            "CLIENT": "none",
            "REPLICATION": "required",
            "CONTROLLER": "required",
        }
        for tls in config.tls.values():
            assert tls.check_hostname  # the nodes check each other's names
            # Kubernetes Secret strom-tls, in the keys cert-manager.yaml's Certificate
            # writes (CombinedPEM: key + chain in one file, as ssl.keystore.location reads).
            assert mounted_secret(pod, tls.keystore.path) == ("strom-tls", "tls-combined.pem")
            assert mounted_secret(pod, tls.truststore.path) == ("strom-tls", "ca.crt")
        assert node_cert["secretName"] == "strom-tls"
        assert {"type": "CombinedPEM"} in node_cert["additionalOutputFormats"]
        # The admin's password from Secret strom-admin, bootstrapped at format time.
        admin_file = pod.env["ADMIN_PASSWORD_FILE"]
        assert mounted_secret(pod, admin_file) == ("strom-admin", "password")
        # Super users: the admin, and the nodes by their certificate's subject.
        props = config.properties
        assert props["authorizer.class.name"] == (
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        )
        super_users = props["super.users"].split(";")
        assert f"User:{pod.env.get('ADMIN_USER', 'admin')}" in super_users
        assert f"User:CN={node_cert['commonName']}" in super_users
        assert props["allow.everyone.if.no.acl.found"] == "false"
        # The certificate names every pod, the bootstrap Service, and 127.0.0.1 (the probe).
        names = node_cert["dnsNames"]
        assert "*." + pod.fqdn.split(".", 1)[1] in names
        assert f"strom-bootstrap.{pod.namespace}.svc.cluster.local" in names
        assert "127.0.0.1" in node_cert["ipAddresses"]


def test_a_secured_pod_formats_its_volume_with_the_admin_from_the_secret(tmp_path):
    # strom-entrypoint as the first pod runs it, with the overlay's config (its log.dirs
    # moved here) and the Secret's password file: the volume is formatted and the admin's
    # credential waits in the bootstrap checkpoint for the first active controller.
    [pod, *_] = pods(render("secured"), tmp_path)
    data = tmp_path / "data"
    config = tmp_path / "secured.properties"
    config.write_text(pod.config_text.replace("/var/lib/strom/data", str(data)))
    secret = tmp_path / "password"
    secret.write_text("from-the-secret\n")
    env = {**pod.env, "ADMIN_PASSWORD_FILE": str(secret), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, str(DEPLOY / "docker" / "entrypoint.py"), "--config", str(config),
         "--print-env"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "STROM_LISTENERS=CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9094," in result.stdout
    [record] = bootstrap_checkpoint.read(str(data))
    assert record.name == "admin"
