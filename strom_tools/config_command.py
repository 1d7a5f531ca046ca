"""`strom configs`: kafka-configs.sh --describe and --alter for topics and brokers, with
AdminClient (describe_config_entries, incremental_alter_configs), and for users' SCRAM
credentials (strom_tools/user_scram_command.py), as kafka-configs.sh uses Kafka's Admin.

The entity is `--entity-type topics|brokers` with `--entity-name N` or, for brokers,
`--entity-default` (the cluster-wide default, resource name ""); Kafka's shortcuts `--topic
T`, `--broker B` and `--broker-defaults` work too. As in Kafka:
- --describe lists the entity's dynamic configs (those whose source is the entity's own:
  DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG), or with
  --all every config, each as `  name=value sensitive=false synonyms={SOURCE:name=value,
  ...}`; without a name, every topic (every broker, then the default). A topic or broker
  that does not exist is an error (exit 1) in Kafka's words ("The topic 'nope' doesn't
  exist and doesn't have dynamic config."; Kafka's tool prints that line and exits 0);
- --alter sets (--add-config `k=v,k2=[a,b]`, --add-config-file) and deletes
  (--delete-config) in one IncrementalAlterConfigs, after checking that every key to
  delete is set on the entity (`Invalid config(s): k`), and prints `Completed updating
  config for topic T.` / `Completed updating default config for brokers in the cluster.`.

Strom's DescribeConfigs is answered by a controller: a broker's static configs
(server.properties) are those of the controller that answers, not of the broker named.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from strom.admin import AdminClient, ConfigEntry, ConfigResource
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_tools import user_scram_command
from strom_tools.admin_parsing import (
    alter_option_given,
    alter_options_problem,
    parse_add_config,
    parse_delete_config,
    parse_properties,
)
from strom_tools.formatting import config_entry_line, configs_altered, configs_header

ENTITY_TYPES = ("topics", "brokers", "users")
RESOURCE_TYPES = {"topics": "topic", "brokers": "broker"}  # AdminClient's ConfigResource types

Out = Callable[[str], None]


def entity(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(entity type, entity name) from --entity-* or the shortcuts; name "" for the default,
    None for every entity of the type."""
    if args.topic is not None:
        return "topics", args.topic
    if args.broker is not None:
        return "brokers", args.broker
    if args.broker_defaults:
        return "brokers", ""
    return args.entity_type, "" if args.entity_default else args.entity_name


def usage_problem(args: argparse.Namespace) -> str | None:
    """The option combinations kafka-configs.sh refuses (ConfigCommandOptions.checkArgs), as a
    sentence; None when the options fit together."""
    shortcuts = args.topic is not None or args.broker is not None or args.broker_defaults
    if shortcuts and (
        args.entity_type is not None or args.entity_name is not None or args.entity_default
    ):
        return (
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags"
        )
    if sum([args.topic is not None, args.broker is not None, args.broker_defaults]) > 1:
        return "only one of --topic, --broker and --broker-defaults may be given"
    entity_type, name = entity(args)
    if entity_type is None:
        return "At least one entity type must be specified"
    if entity_type == "users":
        return user_scram_command.usage_problem(args)
    if entity_type == "brokers" and name:
        try:
            int(name)
        except ValueError:
            return (
                f"The entity name for brokers must be a valid integer broker id, but it is: {name}"
            )
    if args.describe:
        problem = alter_option_given(args)
        if problem is not None:
            return problem
        if entity_type == "topics" and name == "":
            return "--entity-default must not be specified with --describe of topics"
        return None
    if args.all:
        return "option --all can only be used with --describe"
    if entity_type == "topics" and not name:
        return "An entity name must be specified with --alter of topics"
    if entity_type == "brokers" and name is None:
        return "An entity-name or default entity must be specified with --alter of brokers"
    return alter_options_problem(args)


def _resource(entity_type: str, name: str) -> ConfigResource:
    return ConfigResource(RESOURCE_TYPES[entity_type], name)


def _own_source(entity_type: str, name: str) -> str:
    """The source of the configs set on the entity itself (what --describe shows)."""
    if entity_type == "topics":
        return "DYNAMIC_TOPIC_CONFIG"
    return "DYNAMIC_DEFAULT_BROKER_CONFIG" if name == "" else "DYNAMIC_BROKER_CONFIG"


def entries(
    admin: AdminClient, entity_type: str, name: str, describe_all: bool
) -> list[ConfigEntry]:
    """The entity's configs by name: every one with `describe_all`, else its own."""
    described = admin.describe_config_entries(_resource(entity_type, name))
    source = _own_source(entity_type, name)
    selected = [e for e in described if describe_all or e.source == source]
    return sorted(selected, key=lambda e: e.name)


def _topic_names(admin: AdminClient) -> list[str]:
    return sorted(admin.list_topics())


def _broker_ids(admin: AdminClient) -> list[str]:
    return [str(b) for b in sorted(b["node_id"] for b in admin.describe_cluster()["brokers"])]


def describe(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    entity_type, name = entity(args)
    assert entity_type is not None
    if name is None:
        names = _topic_names(admin) if entity_type == "topics" else [*_broker_ids(admin), ""]
    else:
        names = [name]
        if not args.all and name != "":
            known = _topic_names(admin) if entity_type == "topics" else _broker_ids(admin)
            if name not in known:
                # Kafka prints this line and exits 0; Strom exits 1 with it, as it does
                # with --all (the controller's error), so a script notices the mistyped
                # name (issue 17).
                raise StromError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if entity_type == "topics"
                    else ErrorCode.BROKER_NOT_AVAILABLE,
                    f"The {entity_type[:-1]} '{name}' doesn't exist and doesn't have dynamic "
                    "config.",
                )
    for each in names:
        described = entries(admin, entity_type, each, args.all)  # fails before the header
        out(configs_header(entity_type, each, args.all))
        for entry in described:
            out(config_entry_line(entry))


def alter(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    entity_type, name = entity(args)
    assert entity_type is not None and name is not None
    if args.add_config_file is not None:
        to_set = parse_properties(args.add_config_file)
    elif args.add_config is not None:
        to_set = parse_add_config(args.add_config)
    else:
        to_set = {}
    to_delete = parse_delete_config(args.delete_config)
    current = {e.name for e in entries(admin, entity_type, name, describe_all=False)}
    missing = [key for key in to_delete if key not in current]
    if missing:
        raise StromError(ErrorCode.INVALID_CONFIG, "Invalid config(s): " + ",".join(missing))
    # The sets, then the deletions, as Kafka's ConfigCommand sends them (a key in both is the
    # controller's INVALID_REQUEST either way).
    admin.incremental_alter_configs(_resource(entity_type, name), set_=to_set, delete=to_delete)
    out(configs_altered(entity_type, name))


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    """Topics' and brokers' configs (users' SCRAM credentials: user_scram_command)."""
    (describe if args.describe else alter)(admin, args, out)
