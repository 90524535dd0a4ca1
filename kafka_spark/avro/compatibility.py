"""Avro schema compatibility: can a reader schema read what a writer schema wrote? The rules of
the Avro specification's "Schema Resolution", as Avro's own ``SchemaCompatibility`` (which
Confluent Schema Registry uses) applies them:

* the same primitive type, or a promotion: int to long, float or double; long to float or
  double; float to double; string to bytes and bytes to string;
* records, enums and fixed types match by unqualified name (or an alias of the reader's); a
  reader record field absent from the writer needs a default, writer fields the reader lacks are
  skipped; every writer enum symbol must be a reader symbol, unless the reader enum has a default;
  fixed sizes must be equal;
* arrays by their items, maps by their values;
* a writer union: every branch must be readable; a reader union: some branch must read the writer.

:func:`incompatibilities` returns what is wrong, each with the path to it (empty when compatible).
Pure functions; schemas are given as parsed JSON (dicts, lists, strings).
"""

from __future__ import annotations

from typing import Any

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class _Named(dict):
    """A record, enum or fixed definition, hashable by identity (the graph may be recursive)."""

    __hash__ = object.__hash__  # type: ignore[assignment]


def incompatibilities(
    reader: Any, writer: Any, *, reader_named: dict[str, Any] | None = None, writer_named: dict[str, Any] | None = None
) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty list: it can).
    ``*_named`` are named types defined elsewhere (schema references), by full name."""
    resolved_reader = _resolve(reader, "", dict(reader_named or {}))
    resolved_writer = _resolve(writer, "", dict(writer_named or {}))
    problems: list[str] = []
    _check(resolved_reader, resolved_writer, "", problems, set())
    return problems


def named_types(schema: Any, named: dict[str, Any] | None = None) -> dict[str, Any]:
    """The named types ``schema`` defines (and those of ``named`` it builds on), by full name: what
    a schema that references it may use."""
    known = dict(named or {})
    _resolve(schema, "", known)
    return known


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _resolve(node: Any, namespace: str, named: dict[str, Any]) -> Any:
    """The schema with named-type references replaced by their definitions; ValueError for an
    undefined name."""
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return node
        for candidate in (_full_name(node, namespace), node):
            if candidate in named:
                return named[candidate]
        raise ValueError(f"unknown type {node!r}")
    if isinstance(node, list):
        return [_resolve(branch, namespace, named) for branch in node]
    if not isinstance(node, dict):
        raise ValueError(f"not a schema: {node!r}")
    kind = node.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        space = node.get("namespace", namespace) if "." not in node["name"] else node["name"].rsplit(".", 1)[0]
        full = _full_name(node["name"], node.get("namespace", namespace))
        resolved = _Named(node)
        named[full] = resolved
        if kind in ("record", "error"):
            resolved["fields"] = [{**field, "type": _resolve(field["type"], space, named)} for field in node["fields"]]
        return resolved
    if kind == "array":
        return {"type": "array", "items": _resolve(node["items"], namespace, named)}
    if kind == "map":
        return {"type": "map", "values": _resolve(node["values"], namespace, named)}
    return _resolve(kind, namespace, named)  # {"type": "string", "logicalType": ...}: its underlying type


def _kind(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return "record" if node["type"] == "error" else node["type"]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    writer_name = _short(writer["name"])
    return _short(reader["name"]) == writer_name or writer_name in {_short(a) for a in reader.get("aliases", ())}


def _check(reader: Any, writer: Any, path: str, problems: list[str], seen: set[tuple[int, int]]) -> None:
    key = (id(reader), id(writer))
    if key in seen:  # a recursive type already being compared
        return
    seen.add(key)
    reader_kind, writer_kind = _kind(reader), _kind(writer)
    where = path or "/"
    if writer_kind == "union":
        for index, branch in enumerate(writer):
            _check(reader, branch, f"{path}/{index}", problems, seen)
        return
    if reader_kind == "union":
        for branch in reader:
            trial: list[str] = []
            _check(branch, writer, path, trial, set(seen))
            if not trial:
                return
        problems.append(f"{where}: the reader's union has no branch that reads the writer's {writer_kind}")
        return
    if reader_kind != writer_kind:
        if reader_kind in _PROMOTIONS.get(writer_kind, ()):
            return
        problems.append(f"{where}: the reader's type {reader_kind} cannot read the writer's {writer_kind}")
        return
    if reader_kind in _PRIMITIVES:
        return
    if reader_kind in ("record", "enum", "fixed") and not _names_match(reader, writer):
        problems.append(f"{where}: the reader's name {reader['name']!r} does not match the writer's {writer['name']!r}")
        return
    if reader_kind == "record":
        writer_fields = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", ())]
            written = next((writer_fields[name] for name in names if name in writer_fields), None)
            if written is None:
                if "default" not in field:
                    problems.append(
                        f"{path}/fields/{field['name']}: the reader's field {field['name']!r} is missing "
                        "from the writer's schema and has no default value"
                    )
                continue
            _check(field["type"], written["type"], f"{path}/fields/{field['name']}", problems, seen)
    elif reader_kind == "enum":
        missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
        if missing and "default" not in reader:
            problems.append(f"{where}: the reader's enum lacks the writer's symbols {missing} and has no default")
    elif reader_kind == "fixed":
        if reader["size"] != writer["size"]:
            problems.append(
                f"{where}: the reader's fixed size {reader['size']} differs from the writer's {writer['size']}"
            )
    elif reader_kind == "array":
        _check(reader["items"], writer["items"], f"{path}/items", problems, seen)
    elif reader_kind == "map":
        _check(reader["values"], writer["values"], f"{path}/values", problems, seen)
