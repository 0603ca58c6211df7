"""Layer `webhook`: `volcano-py webhook`, the HTTPS server the apiserver calls for admission.

It serves the paths of Volcano's vc-webhook-manager, so the webhook configurations of Volcano's chart work
unchanged when it stands in for it. `/jobs/validate` makes the checks of `scheduler.webhook.admission`,
`/jobs/mutate` writes Volcano's Job defaults, `/jobflows/validate` refuses a JobFlow that is not a DAG and
`/cronjobs/validate` a CronJob whose schedule, time zone or name Volcano's refuses (`webhook/cronjobs.py`); every
other path Volcano serves is answered "allowed" (volcano-py applies those rules through its CRDs and
controllers, docs/volcano-defaults.md), so a configuration that names it never blocks a request. An
unknown path is a 404. A request the server cannot decode is refused with the reason, never allowed blindly.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from scheduler.cache.kube import Kube, KubeError
from scheduler.jobs.keys import DEFAULT_SCHEDULER
from scheduler.webhook.admission import (
    DEFAULT_CHECKS,
    Checks,
    Decision,
    Queues,
    response,
    review_job,
    review_job_defaults,
    review_jobflow,
    review_queue,
)
from scheduler.webhook.cronjobs import review_cronjob

log = logging.getLogger("volcano_py.webhook")

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
MAX_BODY = 8 * 1024 * 1024  # the apiserver's request size limit is 3 MiB; anything larger is not a review

Handler = Callable[[Mapping[str, Any]], dict[str, Any]]

# Every admission path of Volcano's webhook manager (its default --enabled-admission and the others it has).
VOLCANO_PATHS = (
    "/jobs/mutate", "/jobs/validate", "/pods/mutate", "/pods/validate", "/queues/mutate", "/queues/validate",
    "/podgroups/mutate", "/podgroups/validate", "/jobflows/validate", "/hypernodes/validate",
    "/cronjobs/validate", "/resourcequotas/validate", "/jobtemplates/validate",
)


def kube_queues(kube: Kube) -> Queues:
    def get(name: str) -> Mapping[str, Any] | None:
        return kube.get_or_none(f"{QUEUES}/{quote(name, safe='')}")

    def children(name: str) -> list[str]:
        items = kube.request("GET", QUEUES).get("items") or []
        return [str(q["metadata"]["name"]) for q in items if (q.get("spec") or {}).get("parent") == name]

    return Queues(get, children)


def allow_all(review: Mapping[str, Any]) -> dict[str, Any]:
    return response(review, Decision(True))


def handlers(queues: Queues, enabled: Iterable[str], scheduler_name: str = DEFAULT_SCHEDULER,
             checks: Checks = DEFAULT_CHECKS) -> dict[str, Handler]:
    """The handler of each enabled path: ours for /jobs/validate, /jobs/mutate, /jobflows/validate,
    /cronjobs/validate and /queues/validate, "allowed" for Volcano's other paths."""
    out: dict[str, Handler] = {}
    for path in enabled:
        if path == "/jobs/validate":
            out[path] = lambda review: review_job(review, queues, checks)
        elif path == "/queues/validate":
            out[path] = lambda review: review_queue(review, queues, checks)
        elif path == "/jobs/mutate":
            out[path] = lambda review: review_job_defaults(review, scheduler_name)
        elif path == "/jobflows/validate":
            out[path] = review_jobflow
        elif path == "/cronjobs/validate":
            out[path] = review_cronjob
        elif path in VOLCANO_PATHS:
            out[path] = allow_all
        else:
            raise ValueError(f"--enabled-admission: {path!r} is not an admission path of Volcano's webhook manager "
                             f"(known: {', '.join(VOLCANO_PATHS)})")
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Handler]


class _Request(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0]
        handler = self.server.routes.get(path)
        if handler is None:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no admission webhook at {path}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._send(HTTPStatus.BAD_REQUEST, {"error": "expected an AdmissionReview body"})
            return
        try:
            review = json.loads(self.rfile.read(length))
            if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
                raise ValueError("not an AdmissionReview")
        except ValueError as exc:
            self._send(HTTPStatus.BAD_REQUEST, {"error": f"cannot decode the AdmissionReview: {exc}"})
            return
        try:
            answer = handler(review)
        except (KubeError, OSError) as exc:  # the apiserver was unreachable: refuse, say why, let it retry
            log.warning("%s: cannot read the cluster: %s", path, exc)
            answer = response(review, Decision(False, (f"volcano-py webhook cannot read the cluster: {exc}",)))
        self._send(HTTPStatus.OK, answer)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0] in ("/healthz", "/readyz"):
            self._send(HTTPStatus.OK, {"status": "ok"})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "POST an AdmissionReview to an admission path"})

    def _send(self, status: HTTPStatus, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug(format, *args)


class WebhookServer:
    """The HTTPS server on (host, port) with the given certificate; `start()` serves on a daemon thread."""

    def __init__(self, host: str, port: int, cert_file: str, key_file: str, routes: dict[str, Handler]):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        self.httpd = _Server((host, port), _Request)
        self.httpd.routes = routes
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="webhook", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> WebhookServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
