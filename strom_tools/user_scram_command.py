"""`strom configs --entity-type users`: users' SCRAM credentials, as kafka-configs.sh manages
them over --bootstrap-server (ConfigCommand.alterUserScramCredentialConfigs and
describeClientQuotaAndUserScramCredentialConfigs).

    --alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    --alter --add-config 'SCRAM-SHA-256=[password=alice-secret]'   (4096 iterations)
    --alter --delete-config 'SCRAM-SHA-512'
    --describe [--entity-name alice]

prints Kafka's lines: `Completed updating config for user alice.` and `SCRAM credential
configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096,
SCRAM-SHA-512=iterations=8192`. The password is salted on this side; only the salted password
is sent. Strom has no client quotas, so SCRAM mechanisms are the only configs of a user and
--entity-default (the quota default) is refused. Describing a named user without
credentials fails with RESOURCE_NOT_FOUND and exit 1, where Kafka prints nothing: the same
choice as for an unknown topic (issue 17), so a script notices a mistyped name.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from strom.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from strom.errors import StromError
from strom_api.error_codes import ErrorCode
from strom_api.scram_credential import DEFAULT_ITERATIONS, MECHANISMS
from strom_tools.admin_parsing import (
    alter_option_given,
    alter_options_problem,
    parse_add_config,
    parse_delete_config,
    parse_properties,
)
from strom_tools.formatting import configs_altered

Out = Callable[[str], None]

# Kafka's pattern for a credential's value: iterations first, if given, then the password
# (the rest of the value, commas and '=' included).
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def usage_problem(args: argparse.Namespace) -> str | None:
    if args.entity_default:
        return "--entity-default is not supported for users: Strom has no user quotas"
    if args.all:
        return "option --all can only be used with --describe of topics or brokers"
    if args.describe:
        problem = alter_option_given(args)
        if problem is not None:
            return problem
        return None
    if not args.entity_name:
        return "An entity name must be specified with --alter of users"
    return alter_options_problem(args)


def _unexpected(what: str, names: list[str]) -> StromError:
    return StromError(
        ErrorCode.INVALID_CONFIG,
        f"Only SCRAM credential configs can be {what} for 'users' (Strom has no quotas). "
        f"Unexpected config names: {', '.join(names)}",
    )


def _iterations_and_password(mechanism: str, value: str) -> tuple[int, bytes]:
    """Kafka's iterationsAndPasswordBytes."""
    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        # Kafka prints the whole value here; it holds the password, so Strom does not.
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid credential property {mechanism}: expected "
            f"{mechanism}=[iterations=N,password=...] or {mechanism}=[password=...]",
        )
    text, password = match.groups()
    if text is None or text == "-1":
        return DEFAULT_ITERATIONS, password.encode()
    try:
        return int(text), password.encode()
    except ValueError:  # "iterations=," or "iterations=-,"
        raise StromError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid iterations '{text}' in the credential of {mechanism}",
        ) from None


def alter(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    user = args.entity_name
    if args.add_config_file is not None:
        to_add = parse_properties(args.add_config_file)
    elif args.add_config is not None:
        to_add = parse_add_config(args.add_config)
    else:
        to_add = {}
    to_delete = parse_delete_config(args.delete_config)
    unknown = [k for k in to_add if k not in MECHANISMS]
    if unknown:
        raise _unexpected("added", unknown)
    unknown = [k for k in to_delete if k not in MECHANISMS]
    if unknown:
        raise _unexpected("deleted", unknown)
    alterations: list[UserScramCredentialDeletion | UserScramCredentialUpsertion] = [
        UserScramCredentialDeletion(user, m) for m in to_delete
    ]
    for mechanism, value in to_add.items():
        iterations, password = _iterations_and_password(mechanism, value)
        alterations.append(
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)
        )
    admin.alter_user_scram_credentials(alterations)
    out(configs_altered("users", user))


def describe(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    users = [args.entity_name] if args.entity_name else None
    for user, description in admin.describe_user_scram_credentials(users).items():
        text = ", ".join(
            f"{info.mechanism}=iterations={info.iterations}"
            for info in description.credential_infos
        )
        out(f"SCRAM credential configs for user-principal '{user}' are {text}")


def run(admin: AdminClient, args: argparse.Namespace, out: Out) -> None:
    (describe if args.describe else alter)(admin, args, out)
