"""The lean HTTP/1.1 transport (scheduler/cache/http1.py) against a scripted local server: bodies by length, in
chunks and to the end of the connection; keep-alive and `Connection: close`; a kept-alive connection the server
closed while it was idle; an answer that never comes; and `Kube` on top of it. TLS is the e2e suite's: every
call of the scheduler on the control plane goes through this transport."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest
from kubernetes import client

from scheduler.cache.http1 import Http1
from scheduler.cache.kube import Kube, KubeError, lean_transport

Answer = Callable[[socket.socket, bytes], bool]  # writes an answer to one request; False: close the connection


class Server:
    """Answers each request with the next scripted answer; counts connections and the requests it read."""

    def __init__(self, answers: list[Answer]):
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buf) < length:
                    buf += conn.recv(65536)
                request, buf = head + b"\r\n\r\n" + buf[:length], buf[length:]
                self.requests.append(request)
                if not self.answers or not self.answers.pop(0)(conn, request):
                    return

    def close(self) -> None:
        self.sock.close()


def sized(status: int, body: bytes, extra: str = "") -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}"
                     f"\r\n\r\n".encode() + body)
        return "Connection: close" not in extra
    return answer


def chunked(parts: list[bytes]) -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in parts:  # one send per chunk, split mid-chunk too, so reads end anywhere
            data = f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
            conn.sendall(data[:3])
            conn.sendall(data[3:])
        conn.sendall(b"0\r\n\r\n")
        return True
    return answer


def to_the_end(body: bytes) -> Answer:
    def answer(conn: socket.socket, _: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body)
        return False
    return answer


def hang_up(conn: socket.socket, _: bytes) -> bool:
    return False  # read the request, answer nothing, close


@pytest.fixture
def served():
    servers: list[Server] = []

    def make(*answers: Answer) -> tuple[Server, Http1]:
        server = Server(list(answers))
        servers.append(server)
        return server, Http1(server.url, None)

    yield make
    for s in servers:
        s.close()


def test_answers_by_length_reuse_one_kept_alive_connection(served):
    server, http = served(sized(201, b'{"a": 1}'), sized(200, b"{}"))
    first = http.request("POST", "/api/v1/namespaces/ns/pods/p/binding", {"Accept": "application/json"}, b"{}", 5)
    second = http.request("GET", "/api/v1/pods", {}, None, 5)
    assert (first.status, first.data, second.status, second.data) == (201, b'{"a": 1}', 200, b"{}")
    assert first.headers.get("Content-TYPE") == "application/json"
    assert server.connections == 1
    assert server.requests[0].startswith(b"POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 2\r\n" in server.requests[0] and server.requests[0].endswith(b"\r\n\r\n{}")


def test_a_chunked_answer_is_put_together_and_the_connection_kept(served):
    parts = [b"x" * 5000, b"", b"y" * 3, b"z" * 70000]
    server, http = served(chunked([p for p in parts if p]), sized(200, b"next"))
    assert http.request("GET", "/api/v1/pods", {}, None, 5).data == b"".join(parts)
    assert http.request("GET", "/api/v1/nodes", {}, None, 5).data == b"next"
    assert server.connections == 1


def test_connection_close_is_obeyed_and_a_body_without_length_runs_to_the_end(served):
    server, http = served(sized(200, b"one", "Connection: close\r\n"), to_the_end(b"two" * 1000), sized(200, b"3"))
    assert [http.request("GET", "/", {}, None, 5).data for _ in range(3)] == [b"one", b"two" * 1000, b"3"]
    assert server.connections == 3


def test_a_connection_closed_while_idle_is_replaced_and_the_request_sent_once(served):
    def answer_and_close(conn: socket.socket, request: bytes) -> bool:
        sized(200, b"first")(conn, request)
        return False  # the server drops the kept-alive connection: the client does not know yet

    server, http = served(answer_and_close, sized(201, b"second"))
    assert http.request("GET", "/", {}, None, 5).data == b"first"
    assert http.request("POST", "/bind", {}, b"{}", 5).data == b"second"
    assert server.connections == 2 and [r.split(b" ", 2)[:2] for r in server.requests] == [[b"GET", b"/"],
                                                                                           [b"POST", b"/bind"]]


def test_a_fresh_connection_closed_without_an_answer_is_an_error_not_a_second_send(served):
    server, http = served(hang_up)
    with pytest.raises(ConnectionError):
        http.request("POST", "/bind", {}, b"{}", 5)
    assert len(server.requests) == 1


def test_an_answer_that_never_comes_times_out(served):
    release = threading.Event()

    def silent(conn: socket.socket, _: bytes) -> bool:
        release.wait(10)
        return False

    _, http = served(silent)
    with pytest.raises(TimeoutError):
        http.request("GET", "/", {}, None, 0.3)
    release.set()


def test_a_refused_connection_names_the_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}: cannot connect"):
        Http1(f"http://127.0.0.1:{port}", None).request("GET", "/", {}, None, 2)


def api_client(url: str) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = url
    return client.ApiClient(cfg)


def test_kube_sends_over_it_and_reads_errors_and_retry_after(served, monkeypatch):
    server, _ = served(sized(429, b'{"message": "slow down"}', "Retry-After: 0\r\n"), sized(201, b'{"ok": true}'),
                       sized(404, b'{"message": "pods \\"p\\" not found"}'))
    kube = Kube(api_client(server.url), request_timeout=5)
    assert kube._http1 is not None
    assert kube.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={"a": 1}) == {"ok": True}
    with pytest.raises(KubeError) as missing:
        kube.request("GET", "/api/v1/namespaces/ns/pods/p", query={"x": "a b"})
    assert missing.value.status == 404 and 'pods "p" not found' in str(missing.value)
    assert [r.split(b"\r\n", 1)[0] for r in server.requests] == [
        b"POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1", b"POST /api/v1/namespaces/ns/pods/p/binding HTTP/1.1",
        b"GET /api/v1/namespaces/ns/pods/p?x=a%20b HTTP/1.1"]
    assert server.connections == 1


def test_a_proxy_or_a_stand_in_pool_keeps_the_official_clients_transport() -> None:
    proxied = api_client("https://10.0.0.1:6443")
    proxied.configuration.proxy = "http://proxy:3128"
    assert lean_transport(client.ApiClient(proxied.configuration)) is None
    stand_in = type("Api", (), {"rest_client": type("Rest", (), {"pool_manager": object()})()})()
    assert lean_transport(stand_in) is None
    assert lean_transport(api_client("https://10.0.0.1:6443")) is not None


def test_the_client_side_rate_limit_takes_a_token_for_each_lean_request(served) -> None:
    from scheduler.cache.client import TokenBucket, _RateLimitedPool

    server, _ = served(sized(200, b"{}"), sized(200, b"{}"))
    api = api_client(server.url)
    taken: list[int] = []
    bucket = TokenBucket(1000.0, 10)
    bucket.take = lambda: taken.append(1)  # type: ignore[method-assign]
    api.rest_client.pool_manager = _RateLimitedPool(api.rest_client.pool_manager, bucket)
    kube = Kube(api, request_timeout=5)
    kube.request("GET", "/a")
    kube.request("GET", "/b")
    assert kube._http1 is not None and len(taken) == 2
