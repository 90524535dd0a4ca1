"""``pylog users alter|describe``: SCRAM credentials of any Kafka cluster, as kafka-configs sets
and shows them for ``--entity-type users``.

    pylog users alter alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    pylog users alter alice --add-config 'SCRAM-SHA-512=[password=alice-secret]' --delete-config SCRAM-SHA-256
    pylog users describe [alice]

The password is salted and hashed here, in the client (AlterUserScramCredentials carries the
salted password, KIP-554); the broker keeps the derived keys only. As with kafka-configs, a
password on the command line is visible to other users of the machine (``ps``): give ``-`` as the
password to read it from standard input instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any, cast

_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_DEFAULT_ITERATIONS = 4096  # kafka-configs' default
_CONFIG = re.compile(r"(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]")


def register(
    commands: Any,
    client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    client_config: Callable[[argparse.Namespace], dict[str, Any]],
    error: type[Exception],
) -> None:
    """Add ``users`` to the ``pylog`` command line (see :mod:`kafka_spark.cli.acls` for the arguments)."""
    users = commands.add_parser("users", help="set and show SCRAM credentials of users (kafka-configs)")
    actions = users.add_subparsers(dest="action", required=True)
    alter = client(actions.add_parser("alter", help="add or delete a user's SCRAM credentials"))
    alter.add_argument("user")
    alter.add_argument(
        "--add-config",
        metavar="CONFIG",
        help="SCRAM-SHA-256=[iterations=N,password=P],SCRAM-SHA-512=[password=P] (password - reads standard input)",
    )
    alter.add_argument(
        "--delete-config", metavar="MECHANISMS", help="SCRAM-SHA-256 and/or SCRAM-SHA-512, comma-separated"
    )
    alter.set_defaults(func=lambda args: _alter(args, client_config(args), error))
    describe = client(actions.add_parser("describe", help="which SCRAM credentials users have"))
    describe.add_argument("user", nargs="*", help="default: every user with a credential")
    describe.set_defaults(func=lambda args: _describe(args, client_config(args), error))


def parse_add_config(text: str, error: type[Exception] = ValueError, stdin: Any = None) -> list[tuple[str, int, str]]:
    """``(mechanism, iterations, password)`` per credential of an ``--add-config`` value, as
    kafka-configs reads it; ``error`` naming what is wrong."""
    found = _CONFIG.findall(text)
    if not found or _CONFIG.sub("", text).strip(" ,"):
        raise error(
            f"--add-config {text!r} is not SCRAM-SHA-256=[iterations=N,password=P] (or SCRAM-SHA-512), comma-separated"
        )
    credentials = []
    for mechanism, body in found:
        settings = dict(part.split("=", 1) for part in body.split(",") if "=" in part)
        unknown = set(settings) - {"iterations", "password"}
        if unknown or "password" not in settings:
            raise error(
                f"{mechanism}=[...] takes password= and optionally iterations=, not {sorted(unknown) or body!r}"
            )
        password = settings["password"]
        if password == "-":
            password = (stdin or sys.stdin).readline().rstrip("\n")
        try:
            iterations = int(settings.get("iterations", _DEFAULT_ITERATIONS))
        except ValueError:
            raise error(f"{mechanism}: iterations={settings['iterations']!r} is not a number") from None
        credentials.append((mechanism, iterations, password))
    return credentials


def _alter(args: argparse.Namespace, config: dict[str, Any], error: type[Exception]) -> int:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    changes: list[tuple[str, Any]] = []  # (mechanism, change)
    for mechanism, iterations, password in parse_add_config(args.add_config, error) if args.add_config else ():
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], iterations)
        changes.append((mechanism, UserScramCredentialUpsertion(args.user, info, password.encode())))
    for mechanism in (m.strip().upper() for m in (args.delete_config or "").split(",") if m.strip()):
        if mechanism not in _MECHANISMS:
            raise error(f"--delete-config {mechanism!r}: use {' or '.join(_MECHANISMS)}")
        changes.append((mechanism, UserScramCredentialDeletion(args.user, ScramMechanism[mechanism.replace("-", "_")])))
    if not changes:
        raise error("give --add-config and/or --delete-config")
    admin = AdminClient(config)
    for mechanism, change in changes:  # one request each: Kafka refuses a user named twice in one request
        future = admin.alter_user_scram_credentials([change])[args.user]
        wait_for(future, f"altering the {mechanism} credential of {args.user}", error)
    print(f"Completed updating config for user {args.user}.")
    return 0


def _describe(args: argparse.Namespace, config: dict[str, Any], error: type[Exception]) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    if args.user:
        described = {
            user: wait_for(future, f"describing {user}", error)
            for user, future in cast(dict[str, Any], admin.describe_user_scram_credentials(args.user)).items()
        }
    else:
        described = wait_for(admin.describe_user_scram_credentials(), "describing users", error)
    for user, description in sorted(described.items()):
        credentials = ", ".join(  # as kafka-configs prints them
            f"{info.mechanism.name.replace('_', '-')}=iterations={info.iterations}"
            for info in description.scram_credential_infos
        )
        print(f"SCRAM credential configs for user-principal '{user}' are {credentials}")
    return 0


def wait_for(future: Any, what: str, error: type[Exception]) -> Any:
    """The result of an admin client future; ``error`` with the broker's reason."""
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=30)
    except KafkaException as failure:
        raise error(f"{what} failed: {failure.args[0].name()}: {failure.args[0].str()}") from None
