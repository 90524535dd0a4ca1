"""The ACL authorizer: who may do what, with Kafka's StandardAuthorizer semantics.

Enabled by Kafka's ``authorizer.class.name`` (``org.apache.kafka.metadata.authorizer.StandardAuthorizer``,
or the older ``kafka.security.authorizer.AclAuthorizer``); without it every request is allowed,
as in Kafka. An ACL says that a principal (``User:alice``, or ``User:*`` for everyone), from a
host (an address, or ``*``), is allowed or denied an operation on resources: a resource type
(topic, group, cluster, transactional id, ...) and a name matched literally (``orders``, or ``*``
for every name) or as a prefix (``orders-``). A request is allowed when:

1. its principal is one of ``super.users``; else
2. no DENY ACL matching the principal, host, resource and operation (or ALL) exists; and
3. an ALLOW ACL matches it, where allowing READ, WRITE, DELETE or ALTER also allows DESCRIBE, and
   ALTER_CONFIGS also allows DESCRIBE_CONFIGS (DENY wins over ALLOW); or
4. no ACL at all matches the resource and ``allow.everyone.if.no.acl.found`` is true.

Authenticated is not authorized: a user who signed in with the right password still gets
TOPIC_AUTHORIZATION_FAILED (and friends) for what the ACLs do not grant.

ACLs are kept in ``<log_dir>/acls.json`` (written atomically), so they survive restarts; the
module is pure apart from that file. Thread-safety: event loop only.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kafka_spark.broker.storage import checkpoint

logger = logging.getLogger("kafka_spark.broker.authorizer")

ACL_FILE = "acls.json"
CLUSTER_NAME = "kafka-cluster"  # the cluster resource's one name, as in Kafka
WILDCARD = "*"
ANONYMOUS = "User:ANONYMOUS"
#: authorizer.class.name values that enable this authorizer (Kafka 4's and the ZooKeeper-era one).
AUTHORIZER_CLASSES = frozenset(
    {"org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"}
)


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: An ALLOW of the key allows these too (Kafka's AclEntry implied operations).
IMPLIED = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}

#: The operations that mean something per resource type (Kafka's AclEntry.supportedOperations),
#: for the authorized-operations bit fields of Metadata, DescribeGroups and DescribeCluster.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}


class InvalidAcl(ValueError):
    """An ACL (or filter) that cannot be stored or matched; the message says what to change."""


@dataclass(frozen=True, order=True)
class Acl:
    """One access control entry bound to a resource pattern (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> Acl:
        """This ACL, or InvalidAcl naming what is wrong, as CreateAcls checks it."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl(f"an ACL needs a resource type, not {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"an ACL's pattern type is LITERAL or PREFIXED, not {self.pattern_type.name}")
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            raise InvalidAcl(f"an ACL needs an operation, not {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"an ACL's permission is ALLOW or DENY, not {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("an ACL needs a resource name ('*' for every name)")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.resource_name!r}")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidAcl(f"principal {self.principal!r} is not TYPE:NAME, e.g. User:alice (or User:*)")
        if not self.host:
            raise InvalidAcl("an ACL needs a host ('*' for every host)")
        if self.operation not in (Operation.ALL, *SUPPORTED_OPERATIONS[self.resource_type]):
            raise InvalidAcl(
                f"operation {self.operation.name} does not apply to {self.resource_type.name} "
                f"resources; use one of "
                f"{', '.join(op.name for op in (Operation.ALL, *SUPPORTED_OPERATIONS[self.resource_type]))}"
            )
        return self

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)

    def to_json(self) -> dict[str, object]:
        return {
            "resource_type": self.resource_type.name,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, entry: dict[str, str]) -> Acl:
        return cls(
            ResourceType[entry["resource_type"]],
            entry["resource_name"],
            PatternType[entry["pattern_type"]],
            entry["principal"],
            entry["host"],
            Operation[entry["operation"]],
            Permission[entry["permission"]],
        )


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: ANY (and None) match everything; pattern type
    MATCH selects the ACLs that apply to the named resource (literal, wildcard and prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> AclFilter:
        for name, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission", self.permission),
        ):
            if value == 0:
                raise InvalidAcl(f"a filter's {name} may not be UNKNOWN")
        return self

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not acl.matches_resource(acl.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        return (
            (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation == Operation.ANY or acl.operation == self.operation)
            and (self.permission == Permission.ANY or acl.permission == self.permission)
        )


class Authorizer:
    """The broker's ACLs and the decisions made with them. See the module docstring."""

    def __init__(
        self, log_dir: Path, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._path = Path(log_dir) / ACL_FILE
        self._acls: set[Acl] = set()
        if self._path.exists():
            try:
                document = json.loads(self._path.read_bytes())
                self._acls = {Acl.from_json(entry) for entry in document["acls"]}
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{self._path} does not hold this broker's ACLs ({error}); restore it from a "
                    "backup, or move it away to start with no ACLs"
                ) from None

    # -- decisions ---------------------------------------------------------------------------

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        matching = [acl for acl in self._acls if acl.matches_resource(resource_type, name)]
        if not matching:
            return self.allow_everyone_if_no_acl_found
        mine = [acl for acl in matching if acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in mine):
            return False
        granting = {operation, Operation.ALL, *IMPLIED.get(operation, ())}
        return any(acl.permission == Permission.ALLOW and acl.operation in granting for acl in mine)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer needs WRITE on some topic). Checked on the
        names the ALLOW ACLs give (a prefix stands for the names it starts), each against the DENY
        ACLs as any request would be."""
        if principal in self.super_users:
            return True
        names = {
            acl.resource_name
            for acl in self._acls
            if acl.resource_type == resource_type
            and acl.permission == Permission.ALLOW
            and acl.principal in (principal, "User:*")
            and acl.host in (host, WILDCARD)
            and acl.operation in (operation, Operation.ALL)
        }
        return any(self.authorize(principal, host, operation, resource_type, name) for name in names)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bit field (bit n = operation n) Metadata, DescribeGroups and DescribeCluster answer."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    # -- the ACLs ---------------------------------------------------------------------------

    def acls(self, acl_filter: AclFilter | None = None) -> list[Acl]:
        return sorted(acl for acl in self._acls if acl_filter is None or acl_filter.matches(acl))

    def add(self, acls: Iterable[Acl]) -> None:
        """Store ACLs (validated by the caller); persisted before returning."""
        before = set(self._acls)
        self._acls.update(acls)
        if self._acls != before:
            self._save()

    def remove(self, acl_filter: AclFilter) -> list[Acl]:
        """Delete the ACLs ``acl_filter`` matches; returns them (persisted before returning)."""
        removed = [acl for acl in self._acls if acl_filter.matches(acl)]
        if removed:
            self._acls.difference_update(removed)
            self._save()
        return sorted(removed)

    def _save(self) -> None:
        document = {"version": 1, "acls": [acl.to_json() for acl in sorted(self._acls)]}
        checkpoint.atomic_write(self._path, json.dumps(document, indent=1, sort_keys=True).encode())


def all_operations(resource_type: ResourceType) -> int:
    """The bit field of every operation of a resource type: what a broker without an authorizer
    answers when authorized operations are asked for (everything is allowed)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        bits |= 1 << operation
    return bits


_RDN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def certificate_principal(certificate: dict | None) -> str | None:
    """The principal of a client that presented a certificate (SSL with ssl.client.auth), as
    Kafka's default principal builder names it: ``User:`` and the subject's distinguished name in
    RFC 2253 form, most specific part first (``User:CN=writer,OU=eng,O=acme``). None without one."""
    if not certificate or not certificate.get("subject"):
        return None
    parts = []
    for rdn in reversed(certificate["subject"]):
        parts.append("+".join(f"{_RDN_NAMES.get(key, key)}={_escape(value)}" for key, value in rdn))
    return "User:" + ",".join(parts)


def _escape(value: str) -> str:
    escaped = "".join("\\" + char if char in ',+"\\<>;=' else char for char in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped
