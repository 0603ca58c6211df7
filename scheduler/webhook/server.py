"""Layer `webhook`: `volcano-py webhook`, the HTTPS server the apiserver calls for admission.

It serves the paths of Volcano's vc-webhook-manager, so the webhook configurations of Volcano's chart work
unchanged when it stands in for it. `/jobs/validate` makes the checks of `scheduler.webhook.admission`,
`/jobs/mutate` writes Volcano's Job defaults, `/jobflows/validate` refuses a JobFlow that is not a DAG and
`/cronjobs/validate` a CronJob whose schedule, time zone or name Volcano's refuses (`webhook/cronjobs.py`),
`/podgroups/validate` a PodGroup whose queue is missing or not Open or whose networkTopology sets both
highestTierAllowed and highestTierName (`webhook/podgroups.py`); every
other path Volcano serves is answered "allowed" (volcano-py applies those rules through its CRDs and
controllers, docs/volcano-defaults.md), so a configuration that names it never blocks a request. An
unknown path is a 404. A request the server cannot decode is refused with the reason, never allowed blindly;
a handler that fails on an object refuses that object, naming the exception's type, and logs one line.

No peer can stall the others (`Limits`): the accept loop only accepts; each connection's TLS handshake, reads
and handler run on its own thread, with a deadline for the whole handshake, for a request's headers (the idle
time of a kept-alive connection included) and for its body, so a peer that sends one byte a second is cut like
one that sends nothing; at most `Limits.connections` are open at once, more are closed at accept; a body is at
most MAX_BODY. The stdlib's server, not aiohttp (installed through kopf, not a dependency of ours): aiohttp
offers no cap on connections and no deadline on a TLS handshake below 60 s without reaching into asyncio's
server, while the stdlib's sockets give both directly and keep the answers and the paths as they were.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
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
from scheduler.webhook.podgroups import review_podgroup
from scheduler.webhook.pods import review_pod

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
             checks: Checks = DEFAULT_CHECKS, *, queue_allocation_gate: bool = False) -> dict[str, Handler]:
    """The handler of each enabled path: ours for /jobs/validate, /jobs/mutate, /jobflows/validate,
    /cronjobs/validate, /queues/validate and /pods/mutate (its scheduling gate with SchedulingGatesQueueAdmission,
    `queue_allocation_gate`), "allowed" for Volcano's other paths."""
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
        elif path == "/pods/mutate":
            out[path] = lambda review: review_pod(review, queue_allocation_gate)
        elif path == "/podgroups/validate":
            out[path] = lambda review: review_podgroup(review, queues)
        elif path in VOLCANO_PATHS:
            out[path] = allow_all
        else:
            raise ValueError(f"--enabled-admission: {path!r} is not an admission path of Volcano's webhook manager "
                             f"(known: {', '.join(VOLCANO_PATHS)})")
    return out


@dataclass(frozen=True)
class Limits:
    """What one peer may hold of the server. Every connection gets its own thread, so a peer that stalls costs
    that thread alone; each phase has a deadline for the whole phase (not per read, which a peer sending one byte
    a second would never reach), and connections beyond `connections` are closed at accept."""

    connections: int = 1024  # open at once, those still in their TLS handshake included
    handshake: float = 5.0  # from accept to the end of the TLS handshake
    headers: float = 10.0  # from the handshake or the last answer (a kept-alive connection's idle time) to the
    #                        end of the next request's headers; Go's client drops an idle connection the server
    #                        closed, and the apiserver retries a webhook call that met a closed connection
    body: float = 10.0  # from the end of the headers to the end of the body
    write: float = 10.0  # each send of an answer


class _DeadlineReader(io.RawIOBase):
    """The connection's reads, each bounded by what is left of the deadline of the phase in progress."""

    def __init__(self, sock: socket.socket, write_timeout: float):
        self.sock = sock
        self.write_timeout = write_timeout
        self.deadline = time.monotonic()

    def arm(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the peer took too long to send its request")
        self.sock.settimeout(remaining)
        try:
            return self.sock.recv_into(buffer)
        finally:
            self.sock.settimeout(self.write_timeout)  # the answer's sends are bounded too


def _content_length(value: str | None) -> int | None:
    """The Content-Length header as a size no larger than MAX_BODY, or None."""
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10):
        return None
    length = int(text)
    return length if 0 < length <= MAX_BODY else None


class _Server(HTTPServer):
    """The accept loop only accepts: the TLS handshake, the reads and the handler run on the connection's own
    thread, so no peer can stall it."""

    request_queue_size = 1024  # the listen backlog: a burst of connections must not overflow it (SYN retries cost
    #                            a client seconds)

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext, routes: dict[str, Handler],
                 limits: Limits):
        super().__init__(address, _Request)
        self.context, self.routes, self.limits = context, routes, limits
        self._lock = threading.Lock()
        self.open = 0  # connections held now
        self.peak = 0  # the most held at once
        self.refused = 0  # connections closed at accept because `limits.connections` were open
        self._refusals_logged = 0

    def verify_request(self, request: Any, client_address: Any) -> bool:  # on the accept loop: must not block
        with self._lock:
            if self.open >= self.limits.connections:
                self.refused += 1
                refused, log_it = self.refused, self.refused >= 2 * self._refusals_logged
                if log_it:  # one line for the 1st, 2nd, 4th, 8th, ... refusal
                    self._refusals_logged = refused
            else:
                self.open += 1
                self.peak = max(self.peak, self.open)
                return True
        if log_it:
            log.warning("%d connections open, the limit: closed a new one from %s (%d closed so far)",
                        self.limits.connections, client_address[0], refused)
        return False

    def _release(self) -> None:
        with self._lock:
            self.open -= 1

    def process_request(self, request: Any, client_address: Any) -> None:
        accepted = time.monotonic()
        try:
            threading.Thread(target=self._serve, args=(request, client_address, accepted), name="webhook-conn",
                             daemon=True).start()
        except BaseException:
            self._release()  # socketserver closes the socket and reports the error
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:  # the accept loop's: one line, no traceback
        log.warning("connection from %s: %s", client_address[0], sys.exc_info()[1])

    def _serve(self, sock: socket.socket, client_address: Any, accepted: float) -> None:
        conn = sock
        try:
            conn = tls = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            # CPython's handshake takes one deadline from the socket's timeout for all its reads and writes.
            tls.settimeout(max(0.001, accepted + self.limits.handshake - time.monotonic()))
            tls.do_handshake()
            self.finish_request(tls, client_address)
        except OSError as exc:  # a peer that stalls, drops or speaks no TLS (ssl.SSLError is an OSError)
            log.debug("connection from %s: %s: %s", client_address[0], type(exc).__name__, exc)
        except Exception as exc:  # a bug of ours: one line, and the connection alone is lost
            log.debug("connection from %s: the traceback", client_address[0], exc_info=True)
            log.warning("connection from %s failed: %s: %s", client_address[0], type(exc).__name__, exc)
        finally:
            self.shutdown_request(conn)
            self._release()


class _Request(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.reader = _DeadlineReader(self.connection, self.server.limits.write)
        self.rfile = io.BufferedReader(self.reader)
        self.connection.settimeout(self.server.limits.write)

    def handle_one_request(self) -> None:
        self.reader.arm(self.server.limits.headers)  # a read past it raises TimeoutError: the stdlib closes
        super().handle_one_request()

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        handler = self.server.routes.get(path)
        if handler is None:  # the body is not read: the connection cannot carry another request
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no admission webhook at {path}"}, close=True)
            return
        length = _content_length(self.headers.get("Content-Length"))
        if length is None:
            self._send(HTTPStatus.BAD_REQUEST, {"error": "expected an AdmissionReview body"}, close=True)
            return
        self.reader.arm(self.server.limits.body)
        body = self.rfile.read(length)
        if len(body) < length:  # the peer closed mid-body: nobody to answer
            self.close_connection = True
            return
        try:
            review = json.loads(body)
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
        except Exception as exc:  # a handler failing on one object refuses that object, naming why; no traceback
            log.debug("%s: the traceback", path, exc_info=True)
            log.error("%s: the review of %s failed: %s: %s", path, _described(review), type(exc).__name__, exc)
            answer = response(review, Decision(False, (
                f"volcano-py webhook could not review this object ({type(exc).__name__}); see its log",)))
        self._send(HTTPStatus.OK, answer)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] in ("/healthz", "/readyz"):
            self._send(HTTPStatus.OK, {"status": "ok"})
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": "POST an AdmissionReview to an admission path"})

    def _send(self, status: HTTPStatus, body: Mapping[str, Any], close: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt: str, *args: Any) -> None:  # http.server's access log, at debug level
        log.debug(fmt, *args)


def _described(review: Mapping[str, Any]) -> str:
    request = review.get("request")
    request = request if isinstance(request, dict) else {}
    kind = request.get("kind")
    kind = kind if isinstance(kind, dict) else {}
    return f"{kind.get('kind', '?')} {request.get('namespace', '')}/{request.get('name', '')}"[:200]


class WebhookServer:
    """The HTTPS server on (host, port) with the given certificate; `start()` serves on a daemon thread."""

    def __init__(self, host: str, port: int, cert_file: str, key_file: str, routes: dict[str, Handler],
                 limits: Limits = Limits()):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        self.httpd = _Server((host, port), context, routes, limits)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="webhook",
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> WebhookServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stops accepting; connections still open end at their deadlines (their threads are daemons)."""
        self.httpd.shutdown()
        self.httpd.server_close()
