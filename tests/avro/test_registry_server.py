"""The embedded Schema Registry behaves like Confluent's: confluent-kafka's SchemaRegistryClient
against it, and raw HTTP for the status codes and error codes of Confluent's REST API."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from kafka_spark.avro.compatibility import incompatibilities
from kafka_spark.avro.registry_server import EmbeddedSchemaRegistry


def record(name: str, *fields: dict[str, Any], namespace: str = "shop") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": list(fields)})


V1 = record("User", {"name": "id", "type": "long"})
V2 = record("User", {"name": "id", "type": "long"}, {"name": "email", "type": ["null", "string"], "default": None})
BREAKS = record("User", {"name": "id", "type": "long"}, {"name": "age", "type": "int"})  # no default


@pytest.fixture
def registry():
    with EmbeddedSchemaRegistry() as running:
        yield running


@pytest.fixture
def client(registry):
    return SchemaRegistryClient({"url": registry.url})


def http(registry, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        registry.url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_versions_are_soft_deleted_then_deleted_for_good(client, registry):
    client.register_schema("users-value", Schema(V1, "AVRO"))
    client.register_schema("users-value", Schema(V2, "AVRO"))
    assert client.delete_version("users-value", 1) == 1
    assert client.get_versions("users-value") == [2]
    assert client.get_version("users-value", 1, deleted=True).version == 1  # still there when asked
    assert http(registry, "DELETE", "/subjects/users-value/versions/2?permanent=true") == (
        404,
        {
            "error_code": 40407,
            "message": "Subject 'users-value' Version 2 was not deleted first before being permanently deleted",
        },
    )
    assert client.delete_version("users-value", 1, permanent=True) == 1
    assert http(registry, "GET", "/subjects/users-value/versions/1?deleted=true")[1]["error_code"] == 40402


def test_subjects_are_soft_deleted_then_deleted_for_good_and_keep_their_ids_until_then(client, registry):
    schema_id = client.register_schema("orders-value", Schema(V1, "AVRO"))
    assert http(registry, "DELETE", "/subjects/orders-value?permanent=true")[1]["error_code"] == 40405
    assert client.delete_subject("orders-value") == [1]
    assert "orders-value" not in client.get_subjects()
    assert http(registry, "GET", "/subjects?deleted=true")[1] == ["orders-value"]
    assert http(registry, "GET", "/subjects/orders-value/versions")[1]["error_code"] == 40401
    assert http(registry, "GET", f"/schemas/ids/{schema_id}")[0] == 200  # a soft-deleted schema keeps its id
    assert http(registry, "DELETE", "/subjects/orders-value")[1]["error_code"] == 40404
    assert client.delete_subject("orders-value", permanent=True) == [1]
    assert http(registry, "GET", f"/schemas/ids/{schema_id}") == (
        404,
        {"error_code": 40403, "message": f"Schema {schema_id} not found"},
    )


def test_compatibility_levels_are_configured_globally_and_per_subject(client, registry):
    assert client.get_compatibility() == "BACKWARD"
    assert http(registry, "GET", "/config/users-value")[1]["error_code"] == 40408
    assert http(registry, "GET", "/config/users-value?defaultToGlobal=true")[1] == {"compatibilityLevel": "BACKWARD"}
    assert client.set_compatibility("users-value", "FULL_TRANSITIVE") == {"compatibility": "FULL_TRANSITIVE"}
    assert client.get_compatibility("users-value") == "FULL_TRANSITIVE"
    assert http(registry, "PUT", "/config", {"compatibility": "SIDEWAYS"}) == (
        422,
        {
            "error_code": 42203,
            "message": "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        },
    )
    assert http(registry, "DELETE", "/config/users-value")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert http(registry, "GET", "/config/users-value")[1]["error_code"] == 40408


def test_an_incompatible_schema_is_refused_with_409(client, registry):
    client.register_schema("users-value", Schema(V1, "AVRO"))
    assert client.test_compatibility("users-value", Schema(V2, "AVRO"))
    assert not client.test_compatibility("users-value", Schema(BREAKS, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("users-value", Schema(BREAKS, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert "'age'" in refused.value.error_message and "no default" in refused.value.error_message
    _, verbose = http(
        registry, "POST", "/compatibility/subjects/users-value/versions/latest?verbose=true", {"schema": BREAKS}
    )
    assert verbose["is_compatible"] is False and "/fields/age" in verbose["messages"][0]
    client.set_compatibility("users-value", "NONE")
    assert client.register_schema("users-value", Schema(BREAKS, "AVRO")) > 0  # NONE checks nothing


def test_forward_and_transitive_levels_check_the_right_direction_and_history(client):
    client.set_compatibility("f", "FORWARD")
    client.register_schema("f", Schema(V2, "AVRO"))
    assert client.register_schema("f", Schema(V1, "AVRO"))  # old readers (V2) read V1 data: email defaults
    client.set_compatibility("t", "BACKWARD_TRANSITIVE")
    wide = record("User", {"name": "id", "type": "long"}, {"name": "tag", "type": "string", "default": "x"})
    client.register_schema("t", Schema(wide, "AVRO"))
    client.register_schema("t", Schema(V1, "AVRO"))
    narrow_int = record("User", {"name": "id", "type": "int"})  # cannot read the longs of either
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("t", Schema(narrow_int, "AVRO"))
    assert refused.value.http_status_code == 409


def test_invalid_schemas_and_versions_get_confluents_error_codes(client, registry):
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema("bad-value", Schema('{"type": "record", "name": "X"}', "AVRO"))  # no fields
    assert (invalid.value.http_status_code, invalid.value.error_code) == (422, 42201)
    assert http(registry, "POST", "/subjects/bad-value/versions", {"schema": "{not json"})[1]["error_code"] == 42201
    client.register_schema("users-value", Schema(V1, "AVRO"))
    for version in ("abc", "0", "-2"):
        status, body = http(registry, "GET", f"/subjects/users-value/versions/{version}")
        assert (status, body["error_code"]) == (422, 42202), version
    assert http(registry, "GET", "/subjects/users-value/versions/7")[1] == {
        "error_code": 40402,
        "message": "Version 7 not found.",
    }
    with pytest.raises(SchemaRegistryError) as unknown:
        client.get_latest_version("nobody-value")
    assert (unknown.value.http_status_code, unknown.value.error_code) == (404, 40401)


def test_references_are_stored_returned_and_resolved(client, registry):
    address = record("Address", {"name": "city", "type": "string"})
    client.register_schema("address", Schema(address, "AVRO"))
    person = record("Person", {"name": "home", "type": "shop.Address"})
    reference = SchemaReference("shop.Address", "address", 1)
    schema_id = client.register_schema("person-value", Schema(person, "AVRO", [reference]))
    registered = client.get_latest_version("person-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references] == [("shop.Address", "address", 1)]
    assert http(registry, "GET", f"/schemas/ids/{schema_id}")[1]["references"] == [
        {"name": "shop.Address", "subject": "address", "version": 1}
    ]
    assert http(registry, "GET", "/subjects/address/versions/1/referencedby")[1] == [schema_id]
    assert http(registry, "DELETE", "/subjects/address/versions/1")[1]["error_code"] == 42206  # still referenced
    dangling = Schema(person, "AVRO", [SchemaReference("shop.Address", "address", 9)])
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("other-value", dangling)
    assert refused.value.error_code == 42201


def test_the_same_schema_has_the_same_id_in_every_subject_and_is_found_by_lookup(client, registry):
    first = client.register_schema("a-value", Schema(V1, "AVRO"))
    assert client.register_schema("b-value", Schema(V1, "AVRO")) == first
    assert client.register_schema("a-value", Schema(V1, "AVRO")) == first and client.get_versions("a-value") == [1]
    assert client.lookup_schema("b-value", Schema(V1, "AVRO")).version == 1
    assert http(registry, "POST", "/subjects/b-value", {"schema": V2})[1]["error_code"] == 40403
    assert http(registry, "GET", f"/schemas/ids/{first}/subjects")[1] == ["a-value", "b-value"]
    assert http(registry, "GET", "/schemas/types")[1] == ["AVRO", "JSON", "PROTOBUF"]


@pytest.mark.parametrize(
    "reader, writer, compatible",
    [
        ("long", "int", True),
        ("int", "long", False),
        ("bytes", "string", True),
        ("double", "float", True),
        (["null", "string"], "string", True),
        ("string", ["null", "string"], False),
        ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, {"type": "enum", "name": "E", "symbols": ["A"]}, True),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, {"type": "enum", "name": "E", "symbols": ["A", "B"]}, False),
        (
            {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            True,
        ),
        ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}, False),
        ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
        ({"type": "map", "values": "int"}, {"type": "map", "values": "long"}, False),
        ({"type": "record", "name": "R", "fields": []}, {"type": "record", "name": "S", "fields": []}, False),
        (
            {"type": "record", "name": "R", "aliases": ["S"], "fields": []},
            {"type": "record", "name": "S", "fields": []},
            True,
        ),
    ],
)
def test_avro_resolution_rules(reader, writer, compatible):
    assert (not incompatibilities(reader, writer)) is compatible


def test_recursive_schemas_are_compared_without_looping():
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}, {"name": "v", "type": "int"}],
    }
    wider = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}, {"name": "v", "type": "long"}],
    }
    assert incompatibilities(wider, node) == [] and incompatibilities(node, wider) != []
