"""An embedded Schema Registry: the subset of Confluent's REST API that Avro clients use.

For laptops, notebooks and tests that want Confluent-framed Avro (magic byte + schema id) with no
registry service to install — the registry counterpart of the embedded broker. Clients
(confluent-kafka's ``SchemaRegistryClient``, and through it pylog's ``schemaRegistryUrl``
option) talk to it over HTTP exactly as to Confluent Schema Registry:

* ``POST /subjects/{subject}/versions`` registers a schema (the same schema text gets the same id
  in every subject, as Confluent's registry does) and answers ``{"id": N}``;
* ``GET /schemas/ids/{id}`` answers ``{"schema": ...}``;
* ``POST /subjects/{subject}`` looks a schema up in a subject;
* ``GET /subjects``, ``GET /subjects/{subject}/versions``, ``GET /subjects/{subject}/versions/{v|latest}``.

Not implemented: compatibility checks (every schema is accepted), deletes, modes, contexts,
schema references. Schemas live in memory for the life of the object. Binds to 127.0.0.1.

    with EmbeddedSchemaRegistry() as registry:
        options["schemaRegistryUrl"] = registry.url
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: dict[tuple[str, str], int] = {}  # (schema type, schema text) -> id
        self.schemas: dict[int, tuple[str, str]] = {}  # id -> (schema type, schema text)
        self.subjects: dict[str, list[int]] = {}  # subject -> ids by version (1-based)

    def register(self, subject: str, schema: str, schema_type: str) -> int:
        with self.lock:
            key = (schema_type, schema)
            schema_id = self.ids.get(key)
            if schema_id is None:
                schema_id = self.ids[key] = len(self.ids) + 1
                self.schemas[schema_id] = key
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def version_entry(self, subject: str, version: int) -> dict[str, Any]:
        schema_id = self.subjects[subject][version - 1]
        return _schema_body(self.schemas[schema_id], subject=subject, version=version, id=schema_id)


def _schema_body(entry: tuple[str, str], **extra: Any) -> dict[str, Any]:
    schema_type, schema = entry
    body: dict[str, Any] = {**extra, "schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    return body


class _Handler(BaseHTTPRequestHandler):
    store: _Store  # set on the subclass made per registry

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep tests quiet
        return

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", _CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, code: int, message: str) -> None:
        self._reply(404, {"error_code": code, "message": message})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = urlsplit(self.path).path.rstrip("/")
        store = self.store
        with store.lock:
            if path == "/subjects":
                return self._reply(200, sorted(store.subjects))
            if match := re.fullmatch(r"/schemas/ids/(\d+)", path):
                entry = store.schemas.get(int(match.group(1)))
                if entry is None:
                    return self._not_found(40403, "Schema not found")
                return self._reply(200, _schema_body(entry))
            if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                versions = store.subjects.get(unquote(match.group(1)))
                if versions is None:
                    return self._not_found(40401, "Subject not found")
                return self._reply(200, list(range(1, len(versions) + 1)))
            if match := re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path):
                subject = unquote(match.group(1))
                versions = store.subjects.get(subject)
                if versions is None:
                    return self._not_found(40401, "Subject not found")
                version = len(versions) if match.group(2) == "latest" else int(match.group(2))
                if not 1 <= version <= len(versions):
                    return self._not_found(40402, "Version not found")
                return self._reply(200, store.version_entry(subject, version))
        self._not_found(404, f"no such resource: {path}")

    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        try:
            body = self._body()
        except ValueError:
            return self._reply(422, {"error_code": 42201, "message": "Invalid JSON body"})
        schema, schema_type = body.get("schema"), body.get("schemaType") or "AVRO"
        if not isinstance(schema, str):
            return self._reply(422, {"error_code": 42201, "message": "Invalid schema: 'schema' must be a string"})
        if match := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            schema_id = self.store.register(unquote(match.group(1)), schema, schema_type)
            return self._reply(200, {"id": schema_id})
        if match := re.fullmatch(r"/subjects/([^/]+)", path):
            subject = unquote(match.group(1))
            with self.store.lock:
                schema_id = self.store.ids.get((schema_type, schema))
                versions = self.store.subjects.get(subject, [])
                if schema_id is None or schema_id not in versions:
                    return self._not_found(40403, "Schema not found")
                return self._reply(200, self.store.version_entry(subject, versions.index(schema_id) + 1))
        self._not_found(404, f"no such resource: {path}")


class EmbeddedSchemaRegistry:
    """A Schema Registry on ``http://host:port`` in a background thread of this process."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        handler = type("Handler", (_Handler,), {"store": _Store()})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "EmbeddedSchemaRegistry":
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="pylog-schema-registry",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> "EmbeddedSchemaRegistry":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
