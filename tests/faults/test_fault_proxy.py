"""The chaos suite's fault proxy (tests/chaos/fault_proxy.py) without a control plane (issue 22): its rules
decide what they should, and each action does to a real HTTPS client what it says, in front of a small aiohttp
upstream that plays the apiserver (it answers every request with its verb and path, and a watch with 5 events)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from pathlib import Path

import pytest
import urllib3
from controlplane import wait_for
from fault_proxy import CutWatch, Delay, FaultProxy, Hold, Reset, Respond, Rule, Rules


def test_the_first_rule_that_matches_and_has_faults_left_decides():
    rules = Rules()
    bind = rules.add(Rule("POST", r"/pods/[^/]+/binding$", Respond(500), skip=1, times=2))
    rules.add(Rule(None, r"/pods$", Respond(429, retry_after=1), query=r"watch=1"))
    decide = [rules.decide("POST", "/api/v1/namespaces/a/pods/p-0/binding", "") for _ in range(4)]
    assert decide == [None, Respond(500), Respond(500), None]  # skip 1, then 2 faults, then exhausted
    assert (bind.matched, bind.fired) == (4, 2)
    assert rules.decide("GET", "/api/v1/namespaces/a/pods/p-0/binding", "") is None  # another verb
    assert rules.decide("GET", "/api/v1/pods", "watch=1&resourceVersion=5") == Respond(429, retry_after=1)
    assert rules.decide("GET", "/api/v1/pods", "resourceVersion=5") is None  # the query does not match
    rules.remove(bind)
    assert rules.decide("POST", "/api/v1/namespaces/a/pods/p-0/binding", "") is None


# ---- the actions, through a real proxy -----------------------------------------------------------------------
def _certs(d: Path) -> dict[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    paths = {"ca": str(d / "ca.crt")}
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for stem, san in (("server", True), ("client", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)]))
                   .issuer_name(ca_name).public_key(key.public_key()).serial_number(2 + san)
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)))
        if san:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        (d / f"{stem}.crt").write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        (d / f"{stem}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
        paths[stem] = str(d / f"{stem}.crt")
        paths[f"{stem}_key"] = str(d / f"{stem}.key")
    return paths


class Upstream:
    """An HTTPS server standing in for the apiserver; it requires the client certificate, as the apiserver does."""

    def __init__(self, certs: dict[str, str]):
        import asyncio

        from aiohttp import web

        self.calls: list[tuple[str, str]] = []

        async def handle(request: web.Request) -> web.StreamResponse:
            self.calls.append((request.method, request.path))
            if request.query.get("watch") == "1":
                response = web.StreamResponse()
                response.enable_chunked_encoding()
                await response.prepare(request)
                for i in range(5):
                    await response.write(json.dumps({"type": "ADDED", "object": {"n": i}}).encode() + b"\n")
                await response.write_eof()
                return response
            return web.json_response({"method": request.method, "path": request.path,
                                      "body": (await request.read()).decode()})

        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=certs["ca"])
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_cert_chain(certs["server"], certs["server_key"])
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=ctx)
        self.loop.run_until_complete(site.start())
        self.url = f"https://127.0.0.1:{self.runner.addresses[0][1]}"
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    certs = _certs(tmp_path_factory.mktemp("pki"))
    upstream = Upstream(certs)
    proxy = FaultProxy(upstream.url, ca=certs["ca"], client_cert=certs["client"], client_key=certs["client_key"],
                       serving_cert=certs["server"], serving_key=certs["server_key"])
    with proxy:
        http = urllib3.PoolManager(ca_certs=certs["ca"], retries=False)
        yield proxy, upstream, http
        http.clear()
    upstream.close()


@pytest.fixture
def proxy(proxied):
    proxy, upstream, http = proxied
    proxy.clear()
    upstream.calls.clear()
    return proxied


BIND = "/api/v1/namespaces/a/pods/p-0/binding"


def test_an_unmatched_request_is_forwarded_with_its_body(proxy):
    proxy, upstream, http = proxy
    r = http.request("POST", f"{proxy.url}{BIND}", body=b'{"x": 1}', headers={"Content-Type": "application/json"})
    assert (r.status, json.loads(r.data)) == (200, {"method": "POST", "path": BIND, "body": '{"x": 1}'})
    assert upstream.calls == [("POST", BIND)]
    assert [(s.status, s.action) for s in proxy.requests("POST", "binding$")] == [(200, "forward")]


@pytest.mark.parametrize(("status", "reason", "retry_after"),
                         [(500, "InternalError", None), (409, "Conflict", None), (429, "TooManyRequests", 2)])
def test_respond_sends_a_kubernetes_status_and_never_reaches_the_apiserver(proxy, status, reason, retry_after):
    proxy, upstream, http = proxy
    rule = proxy.add(Rule("POST", "binding$", Respond(status, retry_after=retry_after), times=1))
    r = http.request("POST", f"{proxy.url}{BIND}")
    body = json.loads(r.data)
    assert (r.status, body["kind"], body["reason"], body["code"]) == (status, "Status", reason, status)
    assert r.headers.get("Retry-After") == (str(retry_after) if retry_after else None)
    assert (body.get("details") or {}).get("retryAfterSeconds") == retry_after
    assert upstream.calls == [] and rule.fired == 1
    assert http.request("POST", f"{proxy.url}{BIND}").status == 200  # times=1: the next one goes through


def test_reset_drops_the_connection_and_forwards_nothing(proxy):
    proxy, upstream, http = proxy
    proxy.add(Rule("POST", "binding$", Reset()))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        http.request("POST", f"{proxy.url}{BIND}")
    assert upstream.calls == []


def test_a_delayed_response_times_the_client_out_after_the_apiserver_did_the_work(proxy):
    proxy, upstream, http = proxy
    proxy.add(Rule("POST", "binding$", Delay(1.0, after=True)))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        http.request("POST", f"{proxy.url}{BIND}", timeout=urllib3.Timeout(read=0.3))
    assert upstream.calls == [("POST", BIND)]  # forwarded at once


def test_a_delayed_request_still_arrives_after_the_client_gave_up(proxy):
    proxy, upstream, http = proxy
    proxy.add(Rule("POST", "binding$", Delay(0.6)))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        http.request("POST", f"{proxy.url}{BIND}", body=b"{}", timeout=urllib3.Timeout(read=0.2))
    assert upstream.calls == []
    wait_for(lambda: upstream.calls == [("POST", BIND)], 10, what="the late request forwarded")
    wait_for(lambda: [s.status for s in proxy.requests("POST", "binding$")] == [200], 10, what="it is recorded")


def test_hold_forwards_once_released(proxy):
    proxy, upstream, http = proxy
    release = threading.Event()
    rule = proxy.add(Rule("POST", "binding$", Hold(release)))
    results: list[int] = []
    sender = threading.Thread(target=lambda: results.append(http.request("POST", f"{proxy.url}{BIND}").status))
    sender.start()
    wait_for(lambda: rule.fired == 1, 10, what="the bind held")
    assert upstream.calls == []
    release.set()
    sender.join(10)
    assert results == [200] and upstream.calls == [("POST", BIND)]


def test_cut_watch_aborts_inside_the_event_after_the_kth(proxy):
    proxy, upstream, http = proxy
    proxy.add(Rule("GET", "/pods$", CutWatch(2), query="watch=1", times=1))
    r = http.request("GET", f"{proxy.url}/api/v1/pods?watch=1", preload_content=False)
    got = b""
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for chunk in r.stream(64):
            got += chunk
    lines = got.split(b"\n")
    assert [json.loads(x)["object"]["n"] for x in lines[:-1]] == [0, 1]
    assert lines[-1] and not lines[-1].endswith(b"}")  # half of the third event
    assert proxy.cuts == 1
    assert http.request("GET", f"{proxy.url}/api/v1/pods?watch=1").data.count(b"\n") == 5  # other rules: none
