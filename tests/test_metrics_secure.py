"""`/metrics` over TLS with Kubernetes authentication and authorization (`--metrics-secure`, issue 31), as
controller-runtime's secure metrics: a TokenReview for the bearer token, a SubjectAccessReview for `get` on the
path; 401 without a token or with one the apiserver does not authenticate, 403 for a user it does not authorize,
500 when a review cannot be made. The apiserver is a fake here (`Reviews`); tests/e2e/test_metrics_secure_on_cluster.py
asks a real one."""

from __future__ import annotations

import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography import x509

from scheduler.metrics.auth import (
    ACCESS_REVIEWS,
    MAX_TOKEN,
    TOKEN_REVIEWS,
    MetricsAuth,
    bearer_token,
)
from scheduler.metrics.server import MetricsServer, self_signed, tls_context


class Reviews:
    """The apiserver's two review endpoints: `tokens` maps a token to the user it authenticates, `allowed` the
    (user, path, verb) it authorizes. Records every request."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {
            "good": {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1",
                     "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"k": ["v"]}},
            "nobody": {"username": "system:serviceaccount:default:nobody", "groups": ["system:authenticated"]},
        }
        self.allowed = {("system:serviceaccount:monitoring:prometheus", "/metrics", "get")}
        self.sent: list[tuple[str, Mapping[str, Any]]] = []
        self.fail = False

    def post(self, path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.sent.append((path, body))
        if self.fail:
            raise ConnectionRefusedError("the apiserver is down")
        if path == TOKEN_REVIEWS:
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else {"authenticated": False}}
        assert path == ACCESS_REVIEWS
        spec = body["spec"]
        attrs = spec["nonResourceAttributes"]
        ok = (spec["user"], attrs["path"], attrs["verb"]) in self.allowed
        return {"status": {"allowed": ok, "reason": "" if ok else "no RBAC policy matched"}}

    def paths(self) -> list[str]:
        return [p for p, _ in self.sent]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reviews() -> Reviews:
    return Reviews()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def auth(reviews: Reviews, clock: Clock) -> MetricsAuth:
    return MetricsAuth(reviews.post, ttl=10.0, size=4, clock=clock)


# ---- the filter -----------------------------------------------------------------------------------------------
def test_an_authorized_token_is_allowed_after_a_token_review_and_an_access_review(auth, reviews):
    verdict = auth.check("Bearer good", "/metrics")
    assert (verdict.status, verdict.user) == (200, "system:serviceaccount:monitoring:prometheus")
    assert reviews.paths() == [TOKEN_REVIEWS, ACCESS_REVIEWS]
    assert reviews.sent[0][1]["spec"] == {"token": "good"}
    # The SubjectAccessReview names the user as the TokenReview returned it, and the non-resource URL asked.
    assert reviews.sent[1][1]["spec"] == {
        "user": "system:serviceaccount:monitoring:prometheus", "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"], "extra": {"k": ["v"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "good",
                                    "Bearer t\u00f6ken", "Bearer " + "x" * (MAX_TOKEN + 1)])
def test_no_usable_bearer_token_is_401_without_asking_the_apiserver(auth, reviews, header):
    assert auth.check(header, "/metrics").status == 401
    assert reviews.sent == []


def test_the_bearer_scheme_is_read_in_any_case() -> None:
    assert bearer_token("bearer abc") == bearer_token("BEARER abc") == "abc"


def test_a_token_the_apiserver_does_not_authenticate_is_401(auth, reviews):
    verdict = auth.check("Bearer forged", "/metrics")
    assert verdict.status == 401
    assert reviews.paths() == [TOKEN_REVIEWS]  # no access review for nobody


def test_a_user_without_the_right_is_403_naming_the_user(auth, reviews):
    verdict = auth.check("Bearer nobody", "/metrics")
    assert verdict.status == 403
    assert "system:serviceaccount:default:nobody" in verdict.message
    assert reviews.paths() == [TOKEN_REVIEWS, ACCESS_REVIEWS]


def test_the_access_review_asks_for_the_path_requested(auth, reviews):
    reviews.allowed = {("system:serviceaccount:monitoring:prometheus", "/other", "get")}
    assert auth.check("Bearer good", "/metrics").status == 403
    assert auth.check("Bearer good", "/other").status == 200


def test_a_review_that_cannot_be_made_is_500_and_is_not_cached(auth, reviews):
    reviews.fail = True
    assert auth.check("Bearer good", "/metrics").status == 500
    reviews.fail = False
    assert auth.check("Bearer good", "/metrics").status == 200  # asked again, not a remembered failure
    assert reviews.paths() == [TOKEN_REVIEWS, TOKEN_REVIEWS, ACCESS_REVIEWS]


@pytest.mark.parametrize("answer", [{}, {"status": "yes"}, {"status": {"authenticated": True}},
                                    {"status": {"authenticated": True, "user": {"username": 7}}},
                                    {"status": {"authenticated": True, "user": {"username": "a", "groups": "g"}}},
                                    {"status": {"authenticated": True, "user": {"username": "a" * 5000}}}])
def test_a_token_review_answer_that_is_no_review_is_500(clock, answer):
    auth = MetricsAuth(lambda path, body: answer, clock=clock)
    assert auth.check("Bearer good", "/metrics").status == 500


@pytest.mark.parametrize("answer", [{}, {"status": {}}, {"status": {"allowed": "true"}}])
def test_an_access_review_answer_that_is_no_review_is_500(clock, answer):
    def post(path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        if path == TOKEN_REVIEWS:
            return {"status": {"authenticated": True, "user": {"username": "a"}}}
        return answer

    assert MetricsAuth(post, clock=clock).check("Bearer good", "/metrics").status == 500


def test_allowed_but_denied_is_refused(clock):
    def post(path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        if path == TOKEN_REVIEWS:
            return {"status": {"authenticated": True, "user": {"username": "a"}}}
        return {"status": {"allowed": True, "denied": True}}

    assert MetricsAuth(post, clock=clock).check("Bearer good", "/metrics").status == 403


# ---- the cache --------------------------------------------------------------------------------------------------
def test_answers_are_cached_for_the_ttl_so_a_15s_scrape_costs_two_calls(auth, reviews, clock):
    for _ in range(5):
        assert auth.check("Bearer good", "/metrics").status == 200
    assert len(reviews.sent) == 2  # within the ttl: remembered
    clock.now += 10.0  # the ttl has passed: asked again
    assert auth.check("Bearer good", "/metrics").status == 200
    assert len(reviews.sent) == 4
    for _ in range(4):  # a scrape every 15 s: a TokenReview and an access review each
        clock.now += 15.0
        auth.check("Bearer good", "/metrics")
    assert reviews.paths()[4:] == [TOKEN_REVIEWS, ACCESS_REVIEWS] * 4


def test_negative_answers_are_cached_too(auth, reviews, clock):
    for _ in range(3):
        assert auth.check("Bearer forged", "/metrics").status == 401
        assert auth.check("Bearer nobody", "/metrics").status == 403
    assert reviews.paths() == [TOKEN_REVIEWS, TOKEN_REVIEWS, ACCESS_REVIEWS]
    reviews.allowed.add(("system:serviceaccount:default:nobody", "/metrics", "get"))  # a binding added
    clock.now += 10.0
    assert auth.check("Bearer nobody", "/metrics").status == 200  # seen once the ttl has passed


def test_the_cache_is_bounded_and_keeps_no_token(auth, reviews):
    tokens = [f"tok-{i}" for i in range(50)]
    for token in tokens:
        reviews.tokens[token] = {"username": f"user-{token}"}
        auth.check(f"Bearer {token}", "/metrics")
    assert len(auth.users) <= 4 and len(auth.decisions) <= 4
    kept = repr(list(auth.users._items))
    assert not any(token in kept for token in tokens)
    # The least recently used went first: the last token is still remembered, the first is asked again.
    before = len(reviews.sent)
    auth.check("Bearer tok-49", "/metrics")
    assert len(reviews.sent) == before
    auth.check("Bearer tok-0", "/metrics")
    assert reviews.paths()[before:] == [TOKEN_REVIEWS, ACCESS_REVIEWS]


def test_concurrent_reviews_are_bounded(clock):
    inside, most, lock, release = 0, 0, threading.Lock(), threading.Event()

    def slow(path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        release.wait(5)
        with lock:
            inside -= 1
        return {"status": {"authenticated": False}}

    auth = MetricsAuth(slow, max_inflight=2, wait=0.2, clock=clock)
    results: list[int] = []
    threads = [threading.Thread(target=lambda i=i: results.append(auth.check(f"Bearer t{i}", "/metrics").status))
               for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while len(results) < 4 and time.monotonic() < deadline:  # the 4 beyond the bound give up after `wait`
        time.sleep(0.01)
    release.set()
    for t in threads:
        t.join(5)
    assert most == 2
    assert sorted(results) == [401, 401, 503, 503, 503, 503]


# ---- the server -------------------------------------------------------------------------------------------------
def _client_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=_client_context(),
                                    timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def secure(reviews):
    server = MetricsServer("127.0.0.1:0", tls=tls_context(None, None), auth=MetricsAuth(reviews.post),
                           healthy=lambda: True, ready=lambda: False, timeout=2.0).start()
    yield server
    server.stop()


def test_secure_metrics_answer_only_an_authorized_token(secure):
    base = f"https://127.0.0.1:{secure.port}"
    assert get(f"{base}/metrics")[0] == 401
    assert get(f"{base}/metrics", "forged")[0] == 401
    assert get(f"{base}/metrics", "nobody")[0] == 403
    status, body = get(f"{base}/metrics", "good")
    assert status == 200 and b"# TYPE " in body


def test_probes_stay_open_without_a_token_on_the_secure_server(secure):
    base = f"https://127.0.0.1:{secure.port}"
    assert get(f"{base}/healthz")[0] == 200
    assert get(f"{base}/livez")[0] == 200
    assert get(f"{base}/readyz")[0] == 503  # ready() is false: the probe's own answer, not a refusal


def test_the_secure_server_speaks_no_plain_http(secure):
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{secure.port}/metrics", timeout=5).read()


def test_a_peer_stalled_before_its_handshake_does_not_stop_the_probes(secure):
    idle = [socket.create_connection(("127.0.0.1", secure.port)) for _ in range(5)]
    try:
        started = time.monotonic()
        assert get(f"https://127.0.0.1:{secure.port}/healthz")[0] == 200
        assert time.monotonic() - started < 2.0
    finally:
        for s in idle:
            s.close()


def test_the_certificate_given_is_served(tmp_path, reviews):
    cert, key = self_signed("metrics.example")
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    server = MetricsServer("127.0.0.1:0", tls=tls_context(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")),
                           auth=MetricsAuth(reviews.post)).start()
    try:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))  # verified against the given cert
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname="metrics.example") as tls:
            assert tls.getpeercert()["subject"] == ((("commonName", "metrics.example"),),)
    finally:
        server.stop()


def test_a_guarded_metrics_path_needs_tls(reviews):
    with pytest.raises(ValueError, match="TLS"):
        MetricsServer("127.0.0.1:0", auth=MetricsAuth(reviews.post))


def test_a_probes_only_server_serves_no_metrics():
    server = MetricsServer("127.0.0.1:0", metrics=False).start()
    try:
        assert urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
        assert refused.value.code == 404
    finally:
        server.stop()


def served_name(port: int) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    return str(x509.load_der_x509_certificate(der).subject.rfc4514_string())


def test_a_renewed_certificate_is_served_and_a_half_written_one_is_not(tmp_path, reviews):
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    for path, data in zip((crt, key), self_signed("first.example"), strict=True):
        path.write_bytes(data)
    server = MetricsServer("127.0.0.1:0", tls=tls_context(str(crt), str(key)), auth=MetricsAuth(reviews.post)).start()
    try:
        assert served_name(server.port) == "CN=first.example"
        second_crt, second_key = self_signed("second.example")
        crt.write_bytes(second_crt)  # renewal half-written: the new certificate, the old key
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # re-checked once a second: the mismatched pair is never served
            assert served_name(server.port) == "CN=first.example"
            time.sleep(0.2)
        key.write_bytes(second_key)
        deadline = time.monotonic() + 5
        while served_name(server.port) != "CN=second.example" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served_name(server.port) == "CN=second.example"
    finally:
        server.stop()
