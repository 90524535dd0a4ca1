"""What the embedded Schema Registry (avro/registry_server.py) keeps and decides, as Confluent's does.

* Schemas get ids: the same schema (type, text and references) has the same id in every subject.
* Subjects hold versions 1, 2, ... of schemas. A version is soft-deleted first (hidden, unless
  asked for with ``deleted``), then may be deleted permanently; deleting a subject deletes its
  versions the same way. A soft-deleted schema keeps its id.
* Compatibility levels (NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL,
  FULL_TRANSITIVE), globally (BACKWARD by default) and per subject; a schema that breaks the
  subject's level is refused with 409. Avro schemas are checked by Avro's resolution rules
  (avro/compatibility.py); JSON and Protobuf schemas are stored, checked for syntax only.
* Schema references (``{"name", "subject", "version"}``) are stored, returned and resolved: an Avro
  schema may use the named types of the schemas it references.

Errors are :class:`RegistryError` with Confluent's HTTP status and error code (40401 subject not
found, 40402 version not found, 40403 schema not found, 40404-40407 for deletes in the wrong order,
40408 no subject-level compatibility, 409 incompatible, 42201 invalid schema, 42202 invalid version,
42203 invalid compatibility level). Everything lives in memory. Thread-safety: callers hold
``lock``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from kafka_spark.avro.compatibility import incompatibilities, named_types
from kafka_spark.errors import PylogError

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
_MAX_VERSION = 2**31 - 1


class RegistryError(PylogError):
    """An answer of Confluent's other than 200: HTTP ``status``, its ``error_code`` and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class Schema:
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)

    def body(self, **extra: Any) -> dict[str, Any]:
        """The JSON Confluent answers for it (schemaType and references only when set)."""
        out: dict[str, Any] = {**extra}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [
                {"name": name, "subject": subject, "version": version} for name, subject, version in self.references
            ]
        out["schema"] = self.text
        return out


@dataclass
class Version:
    number: int
    schema_id: int
    deleted: bool = False


@dataclass
class SchemaStore:
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: dict[Schema, int] = field(default_factory=dict)
    schemas: dict[int, Schema] = field(default_factory=dict)
    subjects: dict[str, list[Version]] = field(default_factory=dict)
    global_level: str = "BACKWARD"
    subject_levels: dict[str, str] = field(default_factory=dict)

    # -- reading ---------------------------------------------------------------------------

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(
            name
            for name, versions in self.subjects.items()
            if versions and (deleted or any(not v.deleted for v in versions))
        )

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions (40401 when it has none, or only deleted ones unless ``deleted``)."""
        versions = [v for v in self.subjects.get(subject, ()) if deleted or not v.deleted]
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def version(self, subject: str, spec: str, deleted: bool = False) -> Version:
        """Version ``spec`` ("latest", -1 or a number) of the subject (40401, 42202, 40402)."""
        versions = self.versions(subject, deleted)
        if spec in ("latest", "-1"):
            return versions[-1]
        number = parse_version(spec)
        for version in versions:
            if version.number == number:
                return version
        raise RegistryError(404, 40402, f"Version {number} not found.")

    def schema(self, schema_id: int) -> Schema:
        schema = self.schemas.get(schema_id)
        if schema is None:
            raise RegistryError(404, 40403, f"Schema {schema_id} not found")
        return schema

    def usages(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) pairs holding the schema."""
        self.schema(schema_id)
        return [
            (subject, v.number)
            for subject, versions in sorted(self.subjects.items())
            for v in versions
            if v.schema_id == schema_id and (deleted or not v.deleted)
        ]

    def referenced_by(self, subject: str, spec: str) -> list[int]:
        version = self.version(subject, spec)
        return sorted(
            {
                schema_id
                for schema_id, schema in self.schemas.items()
                if any(ref[1:] == (subject, version.number) for ref in schema.references) and self.usages(schema_id)
            }
        )

    def lookup(self, subject: str, schema: Schema, deleted: bool = False) -> tuple[Version, Schema]:
        versions = self.versions(subject, deleted)
        schema_id = self.ids.get(schema)
        for version in versions:
            if version.schema_id == schema_id:
                return version, schema
        raise RegistryError(404, 40403, "Schema not found")

    # -- registering -----------------------------------------------------------------------

    def register(self, subject: str, schema: Schema) -> int:
        """The schema's id, adding it as the subject's next version unless it is its latest one;
        409 when the subject's compatibility level refuses it."""
        self.validate(schema)
        schema_id = self.ids.get(schema)
        versions = self.subjects.setdefault(subject, [])
        live = [v for v in versions if not v.deleted]
        if schema_id is not None and any(v.schema_id == schema_id for v in live):
            return schema_id
        problems = self.incompatibilities(subject, schema, [self.schemas[v.schema_id] for v in live])
        if problems:
            raise RegistryError(
                409,
                409,
                f"Schema being registered is incompatible with an earlier schema for "
                f'subject "{subject}", details: {problems}',
            )
        if schema_id is None:
            schema_id = self.ids[schema] = max(self.schemas, default=0) + 1
            self.schemas[schema_id] = schema
        versions.append(Version(max((v.number for v in versions), default=0) + 1, schema_id))
        return schema_id

    def validate(self, schema: Schema) -> None:
        """42201 for a schema that does not parse (or whose references do not resolve)."""
        if schema.schema_type not in SCHEMA_TYPES:
            raise RegistryError(
                422, 42201, f"Invalid schema: unknown schema type {schema.schema_type!r}; use {', '.join(SCHEMA_TYPES)}"
            )
        for name, subject, number in schema.references:
            try:
                self.version(subject, str(number))
            except RegistryError:
                raise RegistryError(
                    422,
                    42201,
                    f"Invalid schema: reference {name!r} names version {number} of "
                    f"subject {subject!r}, which does not exist",
                ) from None
        if schema.schema_type == "PROTOBUF":
            return  # stored as given: this registry does not parse Protobuf
        try:
            document = json.loads(schema.text)
        except ValueError as error:
            raise RegistryError(422, 42201, f"Invalid schema: {error}") from None
        if schema.schema_type == "AVRO":
            try:
                import fastavro

                fastavro.parse_schema(document, named_schemas=self._parsed_references(schema))
                named_types(document, self._named(schema))
            except Exception as error:  # noqa: BLE001 fastavro raises SchemaParseException, KeyError, TypeError...
                raise RegistryError(422, 42201, f"Invalid schema: {error}") from None

    def incompatibilities(self, subject: str, schema: Schema, previous: list[Schema]) -> list[str]:
        """Why the subject's level refuses ``schema`` after ``previous`` (oldest first)."""
        level = self.subject_levels.get(subject, self.global_level)
        if level == "NONE" or not previous or schema.schema_type != "AVRO":
            return []
        against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
        new = json.loads(schema.text)
        problems: list[str] = []
        for old_schema in against:
            if old_schema.schema_type != "AVRO":
                continue
            old = json.loads(old_schema.text)
            if level.startswith(("BACKWARD", "FULL")):  # the new schema reads old data
                problems += incompatibilities(
                    new, old, reader_named=self._named(schema), writer_named=self._named(old_schema)
                )
            if level.startswith(("FORWARD", "FULL")):  # old readers read new data
                problems += incompatibilities(
                    old, new, reader_named=self._named(old_schema), writer_named=self._named(schema)
                )
        return problems

    def _referenced(self, schema: Schema) -> list[Schema]:
        """The schemas ``schema`` references, recursively, each after the ones it references."""
        found: list[Schema] = []
        for _, subject, number in schema.references:
            referenced = self.schemas[self.version(subject, str(number), deleted=True).schema_id]
            found += [s for s in self._referenced(referenced) + [referenced] if s not in found]
        return found

    def _named(self, schema: Schema) -> dict[str, Any]:
        """The named types of the schemas ``schema`` references (for compatibility checks)."""
        named: dict[str, Any] = {}
        for referenced in self._referenced(schema):
            named = named_types(json.loads(referenced.text), named)
        return named

    def _parsed_references(self, schema: Schema) -> dict[str, Any]:
        """The same, parsed by fastavro (for validation)."""
        import fastavro

        parsed: dict[str, Any] = {}
        for referenced in self._referenced(schema):
            fastavro.parse_schema(json.loads(referenced.text), named_schemas=parsed)
        return parsed

    # -- deleting --------------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        versions = self.subjects.get(subject) or []
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        if permanent:
            if any(not v.deleted for v in versions):
                raise RegistryError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            del self.subjects[subject]
            self.subject_levels.pop(subject, None)
            self._forget_unused()
            return [v.number for v in versions]
        live = [v for v in versions if not v.deleted]
        if not live:
            raise RegistryError(
                404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        self._refuse_if_referenced(subject, live)
        for version in live:
            version.deleted = True
        return [v.number for v in live]

    def delete_version(self, subject: str, spec: str, permanent: bool) -> int:
        version = self.version(subject, spec, deleted=True)
        if permanent:
            if not version.deleted:
                raise RegistryError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {version.number} was not deleted "
                    "first before being permanently deleted",
                )
            self.subjects[subject].remove(version)
            if not self.subjects[subject]:
                del self.subjects[subject]
            self._forget_unused()
            return version.number
        if version.deleted:
            raise RegistryError(
                404,
                40406,
                f"Subject '{subject}' Version {version.number} was soft deleted.Set "
                "permanent=true to delete permanently",
            )
        self._refuse_if_referenced(subject, [version])
        version.deleted = True
        return version.number

    def _refuse_if_referenced(self, subject: str, versions: list[Version]) -> None:
        numbers = {v.number for v in versions}
        for schema_id, schema in self.schemas.items():
            if any(ref[1] == subject and ref[2] in numbers for ref in schema.references) and self.usages(schema_id):
                raise RegistryError(
                    422,
                    42206,
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={sorted(numbers)}}}: delete schema {schema_id} first",
                )

    def _forget_unused(self) -> None:
        used = {v.schema_id for versions in self.subjects.values() for v in versions}
        for schema_id in [i for i in self.schemas if i not in used]:
            del self.ids[self.schemas.pop(schema_id)]

    # -- configuration -----------------------------------------------------------------------

    def level(self, subject: str | None, default_to_global: bool = False) -> str:
        if subject is None:
            return self.global_level
        level = self.subject_levels.get(subject)
        if level is None:
            if default_to_global:
                return self.global_level
            raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
        return level

    def set_level(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise RegistryError(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, "
                "full, backward_transitive, forward_transitive, and full_transitive",
            )
        if subject is None:
            self.global_level = level.upper()
        else:
            self.subject_levels[subject] = level.upper()
        return level.upper()

    def delete_level(self, subject: str) -> str:
        level = self.level(subject)
        del self.subject_levels[subject]
        return level


def parse_version(spec: str) -> int:
    """A version number in [1, 2^31-1], else 42202 (as Confluent answers "abc" or 0)."""
    try:
        number = int(spec)
    except ValueError:
        number = 0
    if not 1 <= number <= _MAX_VERSION:
        raise RegistryError(
            422,
            42202,
            f"The specified version '{spec}' is not a valid version id. Allowed values "
            'are between [1, 2^31-1] and the string "latest"',
        )
    return number
