"""STROM_<KEY> environment variables set config keys (deploy/docker: per-pod values such as
node.id come from the environment), between the file and --override."""

from __future__ import annotations

import pytest

from server import server_config
from storage.errors import InvalidConfigError

FILE = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
log.dirs=/tmp/strom-env-test
"""


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(FILE)
    return str(path)


def test_variable_names_map_to_keys():
    assert server_config.env_overrides(
        {
            "STROM_NODE_ID": "7",
            "STROM_CONTROLLER_QUORUM_VOTERS": "7@h:1",
            "STROM_BROKER_RACK": " zone-a ",
            "HOME": "/root",  # not ours
            "STROM_": "x",  # no key at all
            "XSTROM_NODE_ID": "9",
        }
    ) == {"node.id": "7", "controller.quorum.voters": "7@h:1", "broker.rack": "zone-a"}


def test_environment_wins_over_the_file_and_override_over_both(config_file):
    environ = {
        "STROM_NODE_ID": "3",
        "STROM_CONTROLLER_QUORUM_VOTERS": "3@127.0.0.1:9093",
        "STROM_BROKER_RACK": "zone-b",
    }
    config = server_config.load(config_file, [], environ)
    assert config.node_id == 3
    assert config.voters == {3: "127.0.0.1:9093"}
    assert config.rack == "zone-b"
    config = server_config.load(config_file, ["broker.rack=zone-c"], environ)
    assert config.rack == "zone-c"
    assert server_config.load(config_file, [], {}).node_id == 1


def test_a_bad_value_names_the_key(config_file):
    with pytest.raises(InvalidConfigError, match="'node.id'"):
        server_config.load(config_file, [], {"STROM_NODE_ID": "three"})


def test_unknown_variables_are_reported_like_unknown_keys(config_file):
    config = server_config.load(config_file, [], {"STROM_NO_SUCH_THING": "1"})
    assert config.unknown == ("no.such.thing",)


def test_the_process_environment_is_the_default(config_file, monkeypatch):
    monkeypatch.setenv("STROM_NODE_ID", "5")
    monkeypatch.setenv("STROM_CONTROLLER_QUORUM_VOTERS", "5@127.0.0.1:9093")
    assert server_config.load(config_file).node_id == 5
