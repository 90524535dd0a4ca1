"""``pylog acls add|remove|list``: ACLs of any Kafka cluster (pylog's broker with an authorizer,
or Apache Kafka), with kafka-acls' options and output.

    pylog acls add --allow-principal User:alice --operation Read --operation Write --topic orders
    pylog acls add --allow-principal User:alice --consumer --topic orders --group orders-app
    pylog acls add --deny-principal User:bob --operation All --topic orders- --resource-pattern-type prefixed
    pylog acls list --topic orders
    pylog acls remove --allow-principal User:alice --operation Write --topic orders

Resources: --topic, --group, --transactional-id (each repeatable) and --cluster; a wildcard
resource is ``--topic '*'``. ``--producer`` stands for WRITE, DESCRIBE and CREATE on the topics
(and, with ``--idempotent``, IDEMPOTENT_WRITE on the cluster; with ``--transactional-id``, WRITE
and DESCRIBE on it), ``--consumer`` for READ and DESCRIBE on the topics and READ on the groups,
as kafka-acls has them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from kafka_spark.cli.users import wait_for

_OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
    "CreateTokens",
    "DescribeTokens",
)
_PATTERNS = ("literal", "prefixed", "match", "any")
_CLUSTER = "kafka-cluster"


def register(
    commands: Any,
    client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    client_config: Callable[[argparse.Namespace], dict[str, Any]],
    error: type[Exception],
) -> None:
    """Add ``acls`` to the ``pylog`` command line; ``client`` adds the connection options,
    ``client_config`` turns them into librdkafka settings, ``error`` is what a failure raises (the
    command line prints it as one line)."""
    acls = commands.add_parser("acls", help="add, remove and list ACLs (kafka-acls)")
    actions = acls.add_subparsers(dest="action", required=True)
    for name, help_text, handler in (
        ("add", "create ACLs", _add),
        ("remove", "delete ACLs", _remove),
        ("list", "list ACLs", _list),
    ):
        sub = client(actions.add_parser(name, help=help_text))
        _resource_options(sub, listing=name == "list")
        if name != "list":
            sub.add_argument(
                "--allow-principal",
                action="append",
                default=[],
                metavar="PRINCIPAL",
                help="e.g. User:alice (User:* for everyone)",
            )
            sub.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
            sub.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default *")
            sub.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default *")
            sub.add_argument(
                "--operation",
                action="append",
                default=[],
                type=_operation_name,
                metavar="OPERATION",
                help=", ".join(_OPERATIONS),
            )
            sub.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE and CREATE on the topics")
            sub.add_argument(
                "--consumer", action="store_true", help="READ and DESCRIBE on the topics, READ on the groups"
            )
            sub.add_argument(
                "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster"
            )
        else:
            sub.add_argument("--principal", action="append", default=[], help="only the ACLs of these principals")
        sub.set_defaults(func=lambda args, handler=handler: handler(args, client_config(args), error))


def _resource_options(sub: argparse.ArgumentParser, listing: bool) -> None:
    sub.add_argument("--topic", action="append", default=[])
    sub.add_argument("--group", action="append", default=[])
    sub.add_argument("--transactional-id", action="append", default=[])
    sub.add_argument("--cluster", action="store_true")
    sub.add_argument(
        "--resource-pattern-type",
        choices=_PATTERNS,
        default="any" if listing else "literal",
        type=str.lower,
        help="literal (the default of add and remove) or prefixed; list and remove also "
        "take match and any (the default of list)",
    )


def _operation_name(text: str) -> str:
    for name in _OPERATIONS:
        if name.lower() == text.replace("_", "").replace("-", "").lower():
            return name
    raise argparse.ArgumentTypeError(f"unknown operation {text!r}; use one of {', '.join(_OPERATIONS)}")


def _resources(args: argparse.Namespace) -> list[tuple[Any, str]]:
    from confluent_kafka.admin import ResourceType

    resources = [(ResourceType.TOPIC, name) for name in args.topic]
    resources += [(ResourceType.GROUP, name) for name in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.BROKER, _CLUSTER))
    return resources


def _bindings(args: argparse.Namespace, error: type[Exception]) -> list[Any]:
    """The ACLs ``add`` and ``remove`` name, as kafka-acls builds them."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    wanted: list[tuple[Any, str, AclOperation]] = []
    for kind, name in _resources(args):
        wanted += [(kind, name, AclOperation[_upper(op)]) for op in args.operation]
    if args.producer:
        wanted += [
            (ResourceType.TOPIC, topic, op)
            for topic in args.topic
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
        ]
        wanted += [
            (ResourceType.TRANSACTIONAL_ID, tid, op)
            for tid in args.transactional_id
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        if args.idempotent:
            wanted.append((ResourceType.BROKER, _CLUSTER, AclOperation.IDEMPOTENT_WRITE))
    if args.consumer:
        wanted += [
            (ResourceType.TOPIC, topic, op) for topic in args.topic for op in (AclOperation.READ, AclOperation.DESCRIBE)
        ]
        wanted += [(ResourceType.GROUP, group, AclOperation.READ) for group in args.group]
    if not wanted:
        raise error(
            "name a resource (--topic, --group, --transactional-id or --cluster) and an --operation "
            "(or --producer / --consumer)"
        )
    if not args.allow_principal and not args.deny_principal:
        raise error("name who: --allow-principal User:NAME or --deny-principal User:NAME")
    bindings = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for principal in principals:
            if ":" not in principal:
                raise error(f"principal {principal!r} is not TYPE:NAME; write e.g. User:{principal}")
            for host in hosts:
                for kind, name, operation in dict.fromkeys(wanted):
                    bindings.append(
                        AclBinding(
                            kind,
                            name,
                            ResourcePatternType.LITERAL if kind == ResourceType.BROKER else pattern,
                            principal,
                            host,
                            operation,
                            permission,
                        )
                    )
    return bindings


def _upper(operation: str) -> str:
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(operation)).upper()


def _admin(config: dict[str, Any]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(config)


def _add(args: argparse.Namespace, config: dict[str, Any], error: type[Exception]) -> int:
    bindings = _bindings(args, error)
    admin = _admin(config)
    for binding, future in admin.create_acls(bindings).items():
        wait_for(future, f"adding {_describe(binding)}", error)
    print(f"Adding ACLs for {len(bindings)} binding(s):")
    _print(bindings)
    return 0


def _remove(args: argparse.Namespace, config: dict[str, Any], error: type[Exception]) -> int:
    from confluent_kafka.admin import AclBindingFilter

    admin = _admin(config)
    filters = [
        AclBindingFilter(
            b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
        )
        for b in _bindings(args, error)
    ]
    removed = []
    for acl_filter, future in admin.delete_acls(filters).items():
        removed += wait_for(future, f"removing {_describe(acl_filter)}", error)
    print(f"Removed {len(removed)} ACL(s):")
    _print(removed)
    return 0


def _list(args: argparse.Namespace, config: dict[str, Any], error: type[Exception]) -> int:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    admin = _admin(config)
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    resources: list[tuple[Any, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    principals = args.principal or [None]
    found: list[Any] = []
    for kind, name in resources:
        for principal in principals:
            # confluent-kafka types name and host as str; in a filter None matches any (its docs)
            acl_filter = AclBindingFilter(kind, name, pattern, principal, None, AclOperation.ANY, AclPermissionType.ANY)  # type: ignore[arg-type]
            found += [
                acl for acl in wait_for(admin.describe_acls(acl_filter), "listing ACLs", error) if acl not in found
            ]
    _print(found)
    return 0


def _describe(binding: Any) -> str:
    return (
        f"{binding.permission_type.name} {binding.principal} {binding.operation.name} on "
        f"{binding.restype.name} {binding.name}"
    )


def _print(bindings: list[Any]) -> None:
    """kafka-acls' listing: the ACLs grouped by resource pattern."""
    by_resource: dict[tuple[str, str, str], list[Any]] = {}
    for binding in bindings:
        kind = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
        by_resource.setdefault((kind, binding.name, binding.resource_pattern_type.name), []).append(binding)
    for (kind, name, pattern), acls in sorted(by_resource.items()):
        print(f"Current ACLs for resource `ResourcePattern(resourceType={kind}, name={name}, patternType={pattern})`:")
        for acl in acls:
            print(
                f" \t(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
                f"permissionType={acl.permission_type.name})"
            )
        print()
