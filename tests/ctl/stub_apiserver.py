"""A stand-in apiserver for the day-two commands: the unit tests of tests/ctl call it in-process (`StubKube`,
what `scheduler.cli.ctl.client.Client` talks to), and tools/vcctl_parity/compare.py serves it over HTTP so Volcano's
`vcctl` and `volcano-py` can be run against the same objects and their output and requests compared.

It is no Kubernetes: objects from a list, GET of one object, lists (one namespace or all) with a label selector,
POST (generateName, uid), merge PATCH and DELETE; every request is recorded with its body.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scheduler.cache.kube import KubeError

PLURALS = {
    "Job": "jobs",
    "Queue": "queues",
    "PodGroup": "podgroups",
    "Pod": "pods",
    "Event": "events",
    "Command": "commands",
    "JobFlow": "jobflows",
    "JobTemplate": "jobtemplates",
}
CLUSTER_SCOPED = {"queues"}
_LIST = re.compile(r"(/apis?/.+?)(?:/namespaces/([^/]+))?/([a-z]+)")
_ITEM = re.compile(r"(/apis?/.+?)(?:/namespaces/([^/]+))?/([a-z]+)/([^/]+)")


def object_path(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"]
    base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    plural = PLURALS[obj["kind"]]
    meta = obj["metadata"]
    if plural in CLUSTER_SCOPED:
        return f"{base}/{plural}/{meta['name']}"
    return f"{base}/namespaces/{meta.get('namespace', 'default')}/{plural}/{meta['name']}"


def matches(labels: dict[str, str], selector: str) -> bool:
    """`key`, `key=value`, `key==value`, `key in (a,b)`, comma-separated: what the commands send."""
    for term in filter(None, (t.strip() for t in re.split(r",(?![^()]*\))", selector))):
        if m := re.fullmatch(r"(\S+)\s+in\s+\(([^)]*)\)", term):
            if labels.get(m[1]) not in [v.strip() for v in m[2].split(",")]:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


class Stub:
    def __init__(self, objects: list[dict[str, Any]] = ()):  # type: ignore[assignment]
        self.objects: dict[str, dict[str, Any]] = {}
        for obj in objects:
            self.add(obj)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._uids = 0

    def add(self, obj: dict[str, Any]) -> None:
        self.objects[object_path(obj)] = copy.deepcopy(obj)

    def writes(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] != "GET"]

    def list(self, path: str, selector: str) -> dict[str, Any] | None:
        """`<base>/namespaces/<ns>/<plural>` (one namespace) or `<base>/<plural>` (all, or cluster-scoped), in
        the apiserver's order (by namespace, then name)."""
        m = _LIST.fullmatch(path.rstrip("/"))
        if m is None or m[3] not in PLURALS.values():
            return None
        base, namespace, plural = m[1], m[2], m[3]
        items = []
        for key in sorted(self.objects):
            km = _ITEM.fullmatch(key)
            if km is None or km[1] != base or km[3] != plural or (namespace and km[2] != namespace):
                continue
            obj = self.objects[key]
            if selector and not matches(obj["metadata"].get("labels") or {}, selector):
                continue
            items.append(copy.deepcopy(obj))
        kind = next(k for k, v in PLURALS.items() if v == plural)
        version = base.split("/", 2)[2]
        return {"kind": f"{kind}List", "apiVersion": version, "metadata": {"resourceVersion": "1"}, "items": items}

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        with self._lock:
            self.requests.append({"method": method, "path": path, "query": dict(query), "body": body})
            return self._handle(method, path, query, body)

    def _handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if method == "GET":
            if path in self.objects:
                return 200, copy.deepcopy(self.objects[path])
            listed = self.list(path, query.get("labelSelector", ""))
            return (200, listed) if listed is not None else (404, not_found(path))
        if method == "POST":
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                self._uids += 1
                meta["name"] = f"{meta['generateName']}{self._uids:05d}"
            if "/namespaces/" in path:
                meta.setdefault("namespace", path.split("/namespaces/")[1].split("/")[0])
            self._uids += 1
            meta["uid"] = f"uid-{self._uids}"
            key = f"{path}/{meta['name']}"
            if key in self.objects:
                return 409, status(409, f'{path.rsplit("/", 1)[1]} "{meta["name"]}" already exists')
            self.objects[key] = obj
            return 201, copy.deepcopy(obj)
        if method == "DELETE":
            if self.objects.pop(path, None) is None:
                return 404, not_found(path)
            return 200, status(200, "deleted")
        if method == "PATCH":
            if path not in self.objects:
                return 404, not_found(path)
            merge(self.objects[path], body)
            return 200, copy.deepcopy(self.objects[path])
        return 405, status(405, "method not allowed")


def merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """An RFC 7386 merge patch."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif value is None:
            into.pop(key, None)
        else:
            into[key] = value


def status(code: int, message: str) -> dict[str, Any]:
    reason = {404: "NotFound", 409: "AlreadyExists"}.get(code, "")
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 400 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


def not_found(path: str) -> dict[str, Any]:
    parts = path.rstrip("/").split("/")
    return status(404, f'{parts[-2]} "{parts[-1]}" not found')


def normalized(value: Any) -> Any:
    """A request body as the apiserver keeps it: no nulls, no empty objects or lists."""
    if isinstance(value, dict):
        out = {k: normalized(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def writes(stub: Stub) -> list[dict[str, Any]]:
    out = []
    for r in stub.writes():
        body = normalized(r["body"]) if isinstance(r["body"], dict) else r["body"]
        if isinstance(body, dict) and r["method"] == "DELETE":
            body = None  # DeleteOptions: vcctl sends none, volcano-py asks for background propagation (the default)
        if isinstance(body, dict) and "/namespaces/" in r["path"]:
            meta = body.get("metadata") or {}
            if meta.get("namespace") == r["path"].split("/namespaces/")[1].split("/")[0]:
                meta.pop("namespace")  # the apiserver writes the URL's namespace either way
        out.append(
            {
                "method": r["method"],
                "path": r["path"],
                "body": body,
                **({"patch": r["content_type"].split(";")[0]} if r["method"] == "PATCH" else {}),
            }
        )
    return out


class StubKube:
    """What `scheduler.cli.ctl.client.Client` calls on `scheduler.cache.kube.Kube`, answered by a Stub."""

    def __init__(self, stub: Stub):
        self.stub = stub

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        code, out = self.stub.handle(method, path, {k: str(v) for k, v in (query or {}).items()}, copy.deepcopy(body))
        if content_type:
            self.stub.requests[-1]["content_type"] = content_type
        if code >= 400:
            raise KubeError(code, method, path, json.dumps(out).encode())
        return out

    def get_or_none(self, path: str) -> Any:
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, path: str, body: Any = None) -> bool:
        try:
            self.request("DELETE", path, body=body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def serve(stub: Stub) -> tuple[ThreadingHTTPServer, str]:
    """Serve `stub` on a loopback port in a thread; the server and its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _do(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(split.query).items()}
            code, out = stub.handle(self.command, split.path, query, json.loads(raw) if raw else None)
            if self.headers.get("Content-Type"):
                stub.requests[-1]["content_type"] = self.headers["Content-Type"]
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _do

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
