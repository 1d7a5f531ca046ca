"""deploy/k8s: `kubectl kustomize` renders both overlays; every rendered object validates
against Kubernetes 1.32's schemas (kubernetes-validate --strict, offline); and what each pod
will run agrees with the manifests: strom-entrypoint's computation (deploy/docker/
entrypoint.py) is run for every pod of every StatefulSet with the environment the manifests
give it, and broker/server_config.py loads the result, as the pod will."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from typing import Any

import pytest
import yaml

from broker.health import READY_SERVICE
from broker.node import CONTROLLED_SHUTDOWN_TIMEOUT_S
from broker.server_config import ServerConfig, load
from tests.deploy.deploy_files import DEPLOY, RULES, tool

K8S = DEPLOY / "k8s"
OVERLAYS = ["combined", "split"]
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
    ("overlay", "controllers", "brokers"), [("combined", 3, 3), ("split", 3, 3)]
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
            [advertised] = config.advertised_listeners
            assert (advertised.host, advertised.port) == (pod.fqdn, pod.ports["client"])
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
