"""The webhook's HTTPS server under hostile peers (webhook/server.py `Limits`): the accept loop only accepts, the
TLS handshake and every read run on the connection's own thread with a deadline for the whole phase, and
connections beyond the cap are closed at accept. So it keeps answering admission reviews and /healthz within 2 s
while 20 idle TCP connections, 20 clients stalled mid-handshake, 20 clients sending their headers one byte a
second and 500 concurrent clients are connected; and each kind of stalled peer is cut at its deadline."""

from __future__ import annotations

import asyncio
import datetime
import http.client
import ipaddress
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduler.webhook.admission import Queues
from scheduler.webhook.server import Limits, WebhookServer, handlers

HOST = "127.0.0.1"
BOUND = 2.0  # seconds: what the issue asks of every review and /healthz under the hostile load
QUEUES = {"default": {"metadata": {"name": "default"}, "status": {"state": "Open"}}}


# ---- the server and its clients --------------------------------------------------------------------------------
@dataclass
class Tls:
    crt: Path
    key: Path

    def client(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.crt))


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A self-signed P-256 certificate for 127.0.0.1."""
    directory = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    out = Tls(directory / "tls.crt", directory / "tls.key")
    out.crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return out


@pytest.fixture
def serve(tls: Tls) -> Iterator[Callable[..., WebhookServer]]:
    started: list[WebhookServer] = []

    def start(limits: Limits = Limits(), routes: dict[str, Any] | None = None) -> WebhookServer:
        queues = Queues(QUEUES.get, lambda name: [])
        server = WebhookServer(HOST, 0, str(tls.crt), str(tls.key),
                               routes if routes is not None else handlers(queues, ["/jobs/validate"]), limits)
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


def review_body(uid: str) -> bytes:
    job = {"metadata": {"name": "j", "namespace": "ns"},
           "spec": {"queue": "default", "tasks": [{"name": "w", "replicas": 1, "template": {
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": "CREATE", "object": job}}).encode()


def post_review(port: int, tls: Tls, uid: str, timeout: float = 10.0) -> dict[str, Any]:
    """One review on a new connection, as the apiserver sends it; the answer's AdmissionReview."""
    conn = http.client.HTTPSConnection(HOST, port, context=tls.client(), timeout=timeout)
    try:
        conn.request("POST", "/jobs/validate", review_body(uid), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        return json.loads(resp.read())  # type: ignore[no-any-return]
    finally:
        conn.close()


def get_healthz(port: int, tls: Tls, timeout: float = 10.0) -> dict[str, Any]:
    conn = http.client.HTTPSConnection(HOST, port, context=tls.client(), timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        assert resp.status == 200
        return json.loads(resp.read())  # type: ignore[no-any-return]
    finally:
        conn.close()


def wait_for(condition: Callable[[], bool], deadline: float, what: str) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def client_hello(tls: Tls) -> bytes:
    """The first flight of a real TLS client: a ClientHello."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = tls.client().wrap_bio(incoming, outgoing, server_hostname=HOST)
    with pytest.raises(ssl.SSLWantReadError):
        conn.do_handshake()
    hello = outgoing.read()
    assert len(hello) > 100
    return hello


def tls_connect(port: int, tls: Tls) -> ssl.SSLSocket:
    return tls.client().wrap_socket(socket.create_connection((HOST, port), timeout=10), server_hostname=HOST)


# ---- keeps answering under hostile load ------------------------------------------------------------------------
@dataclass
class Prober:
    """Reviews and /healthz, one after the other, each on a new connection, each timed from connect to answer."""

    port: int
    tls: Tls
    stop: threading.Event = field(default_factory=threading.Event)
    results: list[tuple[str, float, str]] = field(default_factory=list)  # (what, seconds, error or "")

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            what = "review" if n % 2 else "healthz"
            start = time.monotonic()
            error = ""
            try:
                if what == "review":
                    answer = post_review(self.port, self.tls, f"probe-{n}", timeout=BOUND * 3)
                    ok = (answer["response"]["uid"], answer["response"]["allowed"]) == (f"probe-{n}", True)
                else:
                    ok = get_healthz(self.port, self.tls, timeout=BOUND * 3) == {"status": "ok"}
                if not ok:
                    error = "wrong answer"
            except (OSError, AssertionError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            self.results.append((what, time.monotonic() - start, error))


async def _burst(port: int, tls: Tls, n: int, hold: asyncio.Event, latencies: list[float],
                 answered: list[str]) -> None:
    context = tls.client()

    async def one(i: int) -> None:
        start = time.monotonic()
        reader, writer = await asyncio.open_connection(HOST, port, ssl=context, server_hostname=HOST)
        body = review_body(f"burst-{i}")
        writer.write(b"POST /jobs/validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        answer = json.loads(await reader.readexactly(length))
        latencies.append(time.monotonic() - start)
        answered.append(answer["response"]["uid"])
        await hold.wait()  # the connection stays open (kept alive) until the test ends
        writer.close()

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    await asyncio.gather(*tasks)


def test_reviews_and_healthz_answer_within_2s_under_hostile_connections(serve: Callable[..., WebhookServer],
                                                                        tls: Tls) -> None:
    # Deadlines longer than the test, so every hostile peer stays connected until the last probe (the test
    # below shows each is cut at its deadline).
    server = serve(Limits(handshake=60, headers=60))
    port, httpd = server.port, server.httpd
    held: list[socket.socket] = []
    stop = threading.Event()
    prober = Prober(port, tls)
    threads = [threading.Thread(target=prober.run, daemon=True)]
    loop = asyncio.new_event_loop()
    hold = asyncio.Event()
    latencies: list[float] = []
    answered: list[str] = []
    try:
        threads[0].start()
        # 20 idle TCP connections: nothing sent.
        held += [socket.create_connection((HOST, port)) for _ in range(20)]
        # 20 clients stalled mid-handshake: half a ClientHello, then nothing.
        hello = client_hello(tls)
        for _ in range(20):
            sock = socket.create_connection((HOST, port))
            sock.sendall(hello[: len(hello) // 2])
            held.append(sock)
        # 20 clients with their TLS done, sending a request's headers one byte a second.
        slow = [tls_connect(port, tls) for _ in range(20)]
        held += slow
        headers = b"POST /jobs/validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"

        def drip() -> None:
            for i in range(len(headers)):
                for sock in slow:
                    sock.sendall(headers[i: i + 1])
                if stop.wait(1.0):  # the pace of the attack, not a synchronisation
                    return

        threads.append(threading.Thread(target=drip, daemon=True))
        threads[-1].start()
        wait_for(lambda: httpd.open >= 60, 10, "the 60 hostile connections to be held")
        # 500 concurrent clients, each sending a review and keeping its connection open.
        burst = threading.Thread(target=lambda: loop.run_until_complete(
            _burst(port, tls, 500, hold, latencies, answered)), daemon=True)
        threads.append(burst)
        burst.start()
        wait_for(lambda: len(answered) == 500, 60, "the 500 concurrent reviews to be answered")
        # Probes while all 560 connections are open at once.
        before = len(prober.results)
        wait_for(lambda: len(prober.results) >= before + 6, 30, "6 probes with every connection open")
        assert httpd.open >= 560, httpd.open
    finally:
        stop.set()
        prober.stop.set()
        loop.call_soon_threadsafe(hold.set)
        for sock in held:
            sock.close()
        for thread in threads:
            thread.join(10)
        if not loop.is_running():
            loop.close()
    assert sorted(answered) == sorted(f"burst-{i}" for i in range(500))
    assert httpd.peak >= 560 and httpd.refused == 0
    errors = [r for r in prober.results if r[2]]
    slowest = max(seconds for _, seconds, _ in prober.results)
    print(f"probes: {len(prober.results)}, slowest {slowest:.3f} s; 500 reviews at once: slowest "
          f"{max(latencies):.3f} s; peak {httpd.peak} connections")
    assert errors == []
    assert {what for what, _, _ in prober.results} == {"review", "healthz"}
    assert slowest < BOUND, sorted(prober.results, key=lambda r: -r[1])[:5]


# ---- each stalled peer is cut at its deadline ------------------------------------------------------------------
SHORT = Limits(handshake=0.6, headers=0.6, body=0.6, write=5.0)


def closed_after(sock: socket.socket, start: float, drip: bytes = b"", every: float = 0.1,
                 limit: float = 10.0) -> float:
    """Seconds from `start` until the server closes `sock`, while `drip` is sent one byte each `every` seconds
    (a per-read timeout longer than `every` would never fire)."""
    sent = 0
    while time.monotonic() - start < limit:
        readable, _, _ = select.select([sock], [], [], every)
        if readable:
            try:
                if not sock.recv(1024):
                    return time.monotonic() - start
            except (ConnectionResetError, ssl.SSLError):
                return time.monotonic() - start
            continue
        if sent < len(drip):
            try:
                sock.send(drip[sent: sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - start
            sent += 1
    raise AssertionError(f"still open after {limit} s")


@pytest.mark.parametrize("peer", ["idle TCP", "ClientHello one byte at a time", "headers one byte at a time",
                                  "body one byte at a time", "idle after an answer"])
def test_a_stalled_peer_is_cut_at_its_phases_deadline(peer: str, serve: Callable[..., WebhookServer],
                                                      tls: Tls) -> None:
    server = serve(SHORT)
    body = review_body("slow")
    start = time.monotonic()
    if peer == "idle TCP":
        sock: socket.socket = socket.create_connection((HOST, server.port))
        elapsed = closed_after(sock, start)
    elif peer == "ClientHello one byte at a time":
        sock = socket.create_connection((HOST, server.port))
        elapsed = closed_after(sock, start, client_hello(tls))
    else:
        sock = tls_connect(server.port, tls)
        start = time.monotonic()
        head = (b"POST /jobs/validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        if peer == "headers one byte at a time":
            elapsed = closed_after(sock, start, head)
        elif peer == "body one byte at a time":
            sock.sendall(head)
            start = time.monotonic()
            elapsed = closed_after(sock, start, body)
        else:
            sock.sendall(head + body)
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
            start = time.monotonic()
            elapsed = closed_after(sock, start)
    sock.close()
    assert 0.6 * 0.9 <= elapsed < 0.6 + 1.0, elapsed
    wait_for(lambda: server.httpd.open == 0, 5, "the connection's slot to be freed")


def test_connections_beyond_the_cap_are_closed_at_accept_and_the_slot_comes_back(
        serve: Callable[..., WebhookServer], tls: Tls) -> None:
    server = serve(Limits(connections=3))
    idle = [socket.create_connection((HOST, server.port)) for _ in range(3)]
    wait_for(lambda: server.httpd.open == 3, 5, "3 connections held")
    start = time.monotonic()
    with pytest.raises((ssl.SSLError, ConnectionResetError, ConnectionAbortedError)):
        post_review(server.port, tls, "over-the-cap")
    assert time.monotonic() - start < BOUND
    assert (server.httpd.refused, server.httpd.peak) == (1, 3)
    idle.pop().close()
    wait_for(lambda: server.httpd.open == 2, 5, "a slot to be freed")
    assert post_review(server.port, tls, "after")["response"]["uid"] == "after"
    for sock in idle:
        sock.close()


# ---- hostile requests ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", ["abc", "-1", "1e3", "", "99999999999999999999", str(8 * 1024 * 1024 + 1),
                                    "\u0661\u0662"])
def test_a_bad_content_length_is_refused_without_reading_a_body(length: str, serve: Callable[..., WebhookServer],
                                                                tls: Tls) -> None:
    server = serve()
    sock = tls_connect(server.port, tls)
    sock.sendall(b"POST /jobs/validate HTTP/1.1\r\nHost: webhook\r\nContent-Length: " + length.encode() + b"\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):  # the server closes the connection after its answer
        answer += chunk
    sock.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body) == {"error": "expected an AdmissionReview body"}


def test_a_handler_that_raises_refuses_that_object_with_the_reason(serve: Callable[..., WebhookServer],
                                                                   tls: Tls) -> None:
    def broken(review: Any) -> dict[str, Any]:
        raise ZeroDivisionError("a bug")

    server = serve(routes={"/jobs/validate": broken})
    answer = post_review(server.port, tls, "u-9")["response"]
    assert (answer["uid"], answer["allowed"], answer["status"]["code"]) == ("u-9", False, 400)
    assert "ZeroDivisionError" in answer["status"]["message"]
    assert get_healthz(server.port, tls) == {"status": "ok"}
