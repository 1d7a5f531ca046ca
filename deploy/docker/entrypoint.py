"""The container's entrypoint: the per-pod settings of a Strom node in a StatefulSet, then
`exec strom server CONFIG` (so the node is PID 1 and gets SIGTERM itself: a controlled
shutdown).

    strom-entrypoint [--config /etc/strom/server.properties] [--print-env]

The config file (a ConfigMap, shared by all pods) has what every node shares; what differs
per pod is passed to `strom server` as STROM_<KEY> environment variables (broker/
server_config.py reads them), computed here from the pod's environment:

- node.id: kept in the data directory. A pod that was formatted before keeps the node.id
  of its meta.properties; a new one takes NODE_ID_OFFSET + its ordinal (the number at the
  end of POD_NAME, e.g. strom-broker-2) and its data directory is formatted with it
  (`strom storage format --cluster-id $CLUSTER_ID`).
- controller.quorum.voters: one voter per controller pod, generated from CONTROLLER_REPLICAS
  pods of the StatefulSet CONTROLLER_STATEFULSET behind the headless Service
  CONTROLLER_SERVICE, ids CONTROLLER_NODE_ID_OFFSET + ordinal, port CONTROLLER_PORT.
- listeners: every interface (0.0.0.0), so binding never waits for the pod's DNS record:
  a broker's listeners are BROKER_LISTENERS (NAME:PORT,..., e.g. CLIENT:9092,REPLICATION:9094
  in the secured overlay), PLAINTEXT on BROKER_PORT without it; a controller's is the first
  of controller.listener.names on CONTROLLER_PORT. advertised.listeners (a broker's): each
  broker listener at the pod's stable DNS name (POD_NAME.NODE_SERVICE.POD_NAMESPACE.svc.
  CLUSTER_DOMAIN), which the broker registers and Metadata answers carry, as Kafka's pods
  bind 0.0.0.0 and advertise their name. Voters are named the same way.
- the first SCRAM user, when ADMIN_PASSWORD_FILE names a file (a mounted Secret): user
  ADMIN_USER (default admin) with that file's password (its first line) for SCRAM-SHA-512,
  given to the format of a new data directory as `strom storage format --add-scram` gives
  it (salted here; the password never appears in a command line). Like kafka-storage.sh's,
  it only seeds a new cluster: the first active controller of an empty metadata log writes
  it; later changes of the Secret change nothing (`strom configs --entity-type users`
  alters a password).
- broker.rack: the zone label (topology.kubernetes.io/zone) of the Kubernetes node the pod
  runs on (NODE_NAME), read from the API server with the pod's service account. Without
  access the broker runs without a rack and says so.

Variables the pod sets as STROM_<KEY> itself (e.g. STROM_PROCESS_ROLES) win over the file
and are never replaced here, except the ones this script computes. --print-env does all but
the exec and prints the variables instead (for tests and for a look at what a pod would
run). Errors are one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import shutil
import ssl
import sys
import urllib.request
from collections.abc import Mapping

from server import server_config
from server.main import format_storage
from storage import meta_properties
from strom_api.scram_credential import DEFAULT_ITERATIONS, salted_password

ZONE_LABEL = "topology.kubernetes.io/zone"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class EntrypointError(Exception):
    pass


def _get(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise EntrypointError(f"the environment variable {name} is not set")
    return value


def _int(env: Mapping[str, str], name: str) -> int:
    value = _get(env, name)
    try:
        return int(value)
    except ValueError:
        raise EntrypointError(f"{name}={value!r}: expected an integer") from None


def ordinal(pod_name: str) -> int:
    """A StatefulSet pod's ordinal: strom-broker-2 is 2."""
    _, _, number = pod_name.rpartition("-")
    if not number.isdigit():
        raise EntrypointError(f"POD_NAME={pod_name!r} does not end in a StatefulSet ordinal")
    return int(number)


def voters(env: Mapping[str, str]) -> str:
    """controller.quorum.voters for CONTROLLER_REPLICAS controller pods."""
    statefulset = _get(env, "CONTROLLER_STATEFULSET")
    service = _get(env, "CONTROLLER_SERVICE")
    namespace = _get(env, "POD_NAMESPACE")
    domain = env.get("CLUSTER_DOMAIN", "cluster.local")
    offset = _int(env, "CONTROLLER_NODE_ID_OFFSET")
    port = _int(env, "CONTROLLER_PORT")
    replicas = _int(env, "CONTROLLER_REPLICAS")
    if replicas < 1:
        raise EntrypointError(f"CONTROLLER_REPLICAS={replicas}: expected at least 1")
    return ",".join(
        f"{offset + i}@{statefulset}-{i}.{service}.{namespace}.svc.{domain}:{port}"
        for i in range(replicas)
    )


def pod_host(env: Mapping[str, str]) -> str:
    """The pod's own name in its StatefulSet's headless Service."""
    domain = env.get("CLUSTER_DOMAIN", "cluster.local")
    pod, service = _get(env, "POD_NAME"), _get(env, "NODE_SERVICE")
    return f"{pod}.{service}.{_get(env, 'POD_NAMESPACE')}.svc.{domain}"


def broker_listeners(env: Mapping[str, str]) -> list[tuple[str, int]]:
    """(name, port) of each broker listener: BROKER_LISTENERS, else PLAINTEXT:BROKER_PORT."""
    text = env.get("BROKER_LISTENERS", "").strip()
    if not text:
        return [("PLAINTEXT", _int(env, "BROKER_PORT"))]
    found = []
    for item in text.split(","):
        name, _, port = item.strip().partition(":")
        if not name or not port.isdigit():
            raise EntrypointError(f"BROKER_LISTENERS={text!r}: expected NAME:PORT,...")
        found.append((name, int(port)))
    return found


def listeners(env: Mapping[str, str], roles: set[str], controller_listener: str) -> str:
    """What the node binds: every interface."""
    found = []
    if "broker" in roles:
        found += [f"{name}://0.0.0.0:{port}" for name, port in broker_listeners(env)]
    if "controller" in roles:
        found.append(f"{controller_listener}://0.0.0.0:{_int(env, 'CONTROLLER_PORT')}")
    return ",".join(found)


def advertised_listeners(env: Mapping[str, str]) -> str:
    """What a broker registers: its pod's stable name (0.0.0.0 cannot be advertised)."""
    host = pod_host(env)
    return ",".join(f"{name}://{host}:{port}" for name, port in broker_listeners(env))


def plan(env: Mapping[str, str], config_text: str, kept_node_id: int | None) -> dict[str, str]:
    """The STROM_<KEY> variables for this pod (rack aside): pure, for the tests."""
    props = server_config.parse_properties(config_text)
    props.update(server_config.env_overrides(env))
    roles = {r.strip() for r in props.get("process.roles", "").split(",") if r.strip()}
    if not roles:
        raise EntrypointError(
            "process.roles is set neither in the config file nor as STROM_PROCESS_ROLES"
        )
    node_id = kept_node_id
    if node_id is None:
        node_id = _int(env, "NODE_ID_OFFSET") + ordinal(_get(env, "POD_NAME"))
    controller_names = props.get("controller.listener.names", "") or "CONTROLLER"
    settings = {
        "STROM_NODE_ID": str(node_id),
        "STROM_CONTROLLER_QUORUM_VOTERS": voters(env),
        "STROM_LISTENERS": listeners(env, roles, controller_names.split(",")[0].strip()),
    }
    if "broker" in roles:
        settings["STROM_ADVERTISED_LISTENERS"] = advertised_listeners(env)
    return settings


def kept_node_id(config_text: str, env: Mapping[str, str]) -> int | None:
    """The node.id of a data directory formatted before, None for a new one."""
    props = server_config.parse_properties(config_text)
    props.update(server_config.env_overrides(env))
    directory = (props.get("log.dirs") or props.get("log.dir") or "").split(",")[0].strip()
    if not directory:
        raise EntrypointError("log.dirs is not set")
    meta = meta_properties.read(directory)
    return None if meta is None else meta.node_id


def zone(env: Mapping[str, str]) -> str | None:
    """The zone label of the Kubernetes node this pod runs on; None (and a line saying why)
    when it cannot be read."""
    node = env.get("NODE_NAME", "").strip()
    host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
    if not node or not host:
        return None
    port = env.get("KUBERNETES_SERVICE_PORT", "443").strip()
    try:
        with open(os.path.join(SERVICE_ACCOUNT, "token")) as f:
            token = f.read().strip()
        context = ssl.create_default_context(cafile=os.path.join(SERVICE_ACCOUNT, "ca.crt"))
        request = urllib.request.Request(
            f"https://{host}:{port}/api/v1/nodes/{node}",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            labels = json.load(response)["metadata"].get("labels", {})
    except (OSError, ValueError, KeyError) as exc:
        print(f"strom-entrypoint: no broker.rack: cannot read node {node}: {exc}", file=sys.stderr)
        return None
    value = labels.get(ZONE_LABEL)
    if not value:
        print(f"strom-entrypoint: no broker.rack: node {node} has no {ZONE_LABEL}", file=sys.stderr)
    return value or None


ADMIN_MECHANISM = "SCRAM-SHA-512"


def admin_scram(env: Mapping[str, str]) -> list[str]:
    """The --add-scram of the admin user (ADMIN_PASSWORD_FILE), salted; [] without one."""
    path = env.get("ADMIN_PASSWORD_FILE", "").strip()
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            password = f.readline().rstrip("\r\n")
    except OSError as exc:
        raise EntrypointError(f"cannot read ADMIN_PASSWORD_FILE {path}: {exc.strerror}") from None
    if not password:
        raise EntrypointError(f"ADMIN_PASSWORD_FILE {path} is empty")
    user = env.get("ADMIN_USER", "").strip() or "admin"
    if any(c in user for c in ',="[]'):
        raise EntrypointError(f'ADMIN_USER={user!r}: a SCRAM user name without , = " [ ]')
    salt = os.urandom(32)
    salted = salted_password(ADMIN_MECHANISM, password.encode(), salt, DEFAULT_ITERATIONS)
    salt_text, salted_text = base64.b64encode(salt).decode(), base64.b64encode(salted).decode()
    return [
        f"{ADMIN_MECHANISM}=[name={user},iterations={DEFAULT_ITERATIONS},"
        f'salt="{salt_text}",saltedpassword="{salted_text}"]'
    ]


def format_data(config: str, env: Mapping[str, str]) -> None:
    """`strom storage format --ignore-formatted` with the pod's settings, in this process so
    that the admin's credential never shows in a command line."""
    cluster_id, add_scram = _get(env, "CLUSTER_ID"), admin_scram(env)
    os.environ.update(env)  # what format_storage reads the STROM_<KEY> settings from
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        code = format_storage(config, cluster_id, [], True, add_scram)
    if code != 0:
        raise EntrypointError(f"strom storage format failed: {errors.getvalue().strip()}")


def _strom() -> str:
    """The `strom` command beside this Python (the image's venv), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "strom")
    return beside if os.path.exists(beside) else (shutil.which("strom") or "strom")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="/etc/strom/server.properties")
    parser.add_argument("--print-env", action="store_true", help="print, do not exec")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    try:
        try:
            with open(args.config, encoding="utf-8") as f:
                config_text = f.read()
        except OSError as exc:
            raise EntrypointError(f"cannot read {args.config}: {exc.strerror}") from None
        settings = plan(env, config_text, kept_node_id(config_text, env))
        rack = zone(env)
        if rack is not None:
            settings["STROM_BROKER_RACK"] = rack
        env.update(settings)
        format_data(args.config, env)
    except EntrypointError as error:
        print(f"strom-entrypoint: {error}", file=sys.stderr)
        return 1
    if args.print_env:
        for key, value in sorted(settings.items()):
            print(f"{key}={value}")
        return 0
    sys.stdout.flush()
    os.execve(_strom(), [_strom(), "server", args.config], env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
