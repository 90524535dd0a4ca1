"""An embedded Schema Registry: Confluent Schema Registry's REST API, for laptops, notebooks and
tests that want Confluent-framed Avro (magic byte + schema id) with no registry service to
install — the registry counterpart of the embedded broker. Clients (confluent-kafka's
``SchemaRegistryClient``, and through it pylog's ``schemaRegistryUrl`` option) talk to it over
HTTP exactly as to Confluent's:

* ``POST /subjects/{subject}/versions`` registers a schema (with its ``schemaType`` and
  ``references``) and answers ``{"id": N}``: 409 when the subject's compatibility level refuses
  it, 422 (42201) when it does not parse;
* ``POST /subjects/{subject}`` looks a schema up in a subject;
* ``GET /subjects``, ``/subjects/{subject}/versions``, ``/subjects/{subject}/versions/{v|latest}``
  (and ``/schema``, ``/referencedby``), ``?deleted=true`` to include soft-deleted ones;
* ``DELETE /subjects/{subject}`` and ``/subjects/{subject}/versions/{v}``: soft, then with
  ``?permanent=true`` for good;
* ``GET /schemas/ids/{id}`` (and ``/versions``, ``/subjects``), ``GET /schemas/types``;
* ``GET``/``PUT /config`` and ``GET``/``PUT``/``DELETE /config/{subject}`` (compatibility levels);
* ``POST /compatibility/subjects/{subject}/versions[/{v}]`` (``?verbose=true`` says why not).

The rules are avro/registry_store.py's; errors carry Confluent's error codes (40401 unknown
subject, 40402 unknown version, 40403 unknown schema, 42202 invalid version, ...). Schemas live
in memory for the life of the object. Binds to 127.0.0.1.

    with EmbeddedSchemaRegistry() as registry:
        options["schemaRegistryUrl"] = registry.url
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kafka_spark.avro.registry_store import SCHEMA_TYPES, RegistryError, Schema, SchemaStore

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SUBJECT = r"/subjects/([^/]+)"
_VERSION = _SUBJECT + r"/versions/([^/]+)"


class _Request:
    """What a route needs of one HTTP request."""

    def __init__(self, path: str, query: dict[str, list[str]], body: dict[str, Any] | None) -> None:
        self.path = path
        self.query = query
        self.body = body

    def flag(self, name: str) -> bool:
        return self.query.get(name, ["false"])[-1].lower() == "true"

    def schema(self) -> Schema:
        body = self.body or {}
        text, schema_type = body.get("schema"), (body.get("schemaType") or "AVRO").upper()
        if not isinstance(text, str):
            raise RegistryError(422, 42201, "Invalid schema: 'schema' must be a string")
        references = body.get("references") or []
        try:
            refs = tuple((ref["name"], ref["subject"], int(ref["version"])) for ref in references)
        except (KeyError, TypeError, ValueError):
            raise RegistryError(
                422, 42201, "Invalid schema: each reference needs a name, a subject and a version"
            ) from None
        return Schema(schema_type, text, refs)


def _routes(store: SchemaStore) -> list[tuple[str, str, Callable[..., Any]]]:
    """(method, path pattern, handler(request, *groups) -> JSON body) for every endpoint."""

    def subject_version(request: _Request, subject: str, spec: str) -> dict[str, Any]:
        version = store.version(subject, spec, request.flag("deleted"))
        return store.schemas[version.schema_id].body(subject=subject, version=version.number, id=version.schema_id)

    def schema_by_id(request: _Request, schema_id: str) -> dict[str, Any]:
        return store.schema(int(schema_id)).body()

    def lookup(request: _Request, subject: str) -> dict[str, Any]:
        version, schema = store.lookup(subject, request.schema(), request.flag("deleted"))
        return schema.body(subject=subject, version=version.number, id=version.schema_id)

    def compatibility(request: _Request, subject: str, spec: str | None = None) -> dict[str, Any]:
        schema = request.schema()
        store.validate(schema)
        if spec is None:
            against = [store.schemas[v.schema_id] for v in store.subjects.get(subject, ()) if not v.deleted]
        else:
            against = [store.schemas[store.version(subject, spec).schema_id]]
        problems = store.incompatibilities(subject, schema, against)
        answer: dict[str, Any] = {"is_compatible": not problems}
        if request.flag("verbose"):
            answer["messages"] = problems
        return answer

    def set_config(request: _Request, subject: str | None = None) -> dict[str, Any]:
        return {"compatibility": store.set_level(subject, (request.body or {}).get("compatibility"))}

    return [
        ("GET", r"/subjects", lambda r: store.subject_names(r.flag("deleted"))),
        ("GET", _SUBJECT + r"/versions", lambda r, s: [v.number for v in store.versions(s, r.flag("deleted"))]),
        ("GET", _VERSION, subject_version),
        (
            "GET",
            _VERSION + r"/schema",
            lambda r, s, v: _raw(store.schemas[store.version(s, v, r.flag("deleted")).schema_id].text),
        ),
        ("GET", _VERSION + r"/referencedby", lambda r, s, v: store.referenced_by(s, v)),
        ("POST", _SUBJECT + r"/versions", lambda r, s: {"id": store.register(s, r.schema())}),
        ("POST", _SUBJECT, lookup),
        ("DELETE", _SUBJECT, lambda r, s: store.delete_subject(s, r.flag("permanent"))),
        ("DELETE", _VERSION, lambda r, s, v: store.delete_version(s, v, r.flag("permanent"))),
        ("GET", r"/schemas/types", lambda r: list(SCHEMA_TYPES)),
        ("GET", r"/schemas/ids/(\d+)", schema_by_id),
        (
            "GET",
            r"/schemas/ids/(\d+)/versions",
            lambda r, i: [{"subject": s, "version": v} for s, v in store.usages(int(i), r.flag("deleted"))],
        ),
        (
            "GET",
            r"/schemas/ids/(\d+)/subjects",
            lambda r, i: sorted({s for s, _ in store.usages(int(i), r.flag("deleted"))}),
        ),
        ("GET", r"/config", lambda r: {"compatibilityLevel": store.level(None)}),
        ("PUT", r"/config", set_config),
        ("GET", r"/config/([^/]+)", lambda r, s: {"compatibilityLevel": store.level(s, r.flag("defaultToGlobal"))}),
        ("PUT", r"/config/([^/]+)", set_config),
        ("DELETE", r"/config/([^/]+)", lambda r, s: {"compatibilityLevel": store.delete_level(s)}),
        ("POST", r"/compatibility/subjects/([^/]+)/versions", compatibility),
        ("POST", r"/compatibility/subjects/([^/]+)/versions/([^/]+)", compatibility),
    ]


def _raw(text: str) -> Any:
    """A schema as ``/schema`` answers it: the schema itself (JSON), or its text (Protobuf)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Handler(BaseHTTPRequestHandler):
    store: SchemaStore  # set on the subclass made per registry
    routes: list[tuple[str, str, Callable[..., Any]]]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep tests quiet
        return

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", _CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        try:
            body = None
            if method in ("POST", "PUT"):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    raise RegistryError(422, 42201, "Invalid JSON body") from None
            request = _Request(path, parse_qs(url.query), body)
            for route_method, pattern, handler in self.routes:
                match = re.fullmatch(pattern, path)
                if route_method == method and match:
                    groups = [unquote(group) for group in match.groups()]
                    with self.store.lock:
                        answer = handler(request, *groups)
                    return self._reply(200, answer)
            raise RegistryError(404, 404, f"HTTP 404 Not Found: no {method} {path}")
        except RegistryError as error:
            self._reply(error.status, {"error_code": error.error_code, "message": error.message})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")


class EmbeddedSchemaRegistry:
    """A Schema Registry on ``http://host:port`` in a background thread of this process."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        store = SchemaStore()
        handler = type("Handler", (_Handler,), {"store": store, "routes": _routes(store)})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address clients and the Avro options name the registry by, ``http://host:port``."""
        host, port = self._server.socket.getsockname()[:2]  # what server_bind set server_address to
        return f"http://{host}:{port}"

    def start(self) -> EmbeddedSchemaRegistry:
        """Serve on a thread of its own (a second call does nothing); returns the registry."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="pylog-schema-registry", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> EmbeddedSchemaRegistry:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
