"""The raw client waits a throttled request's Retry-After and sends it again, as client-go does (issue 22); no
control plane: a stand-in for the connection pool answers. tests/chaos/test_api_faults.py throttles real binds."""

from __future__ import annotations

import pytest

from scheduler.cache import kube as kube_module
from scheduler.cache.kube import Kube, KubeError, retry_after

BIND = "/api/v1/namespaces/ns/pods/p/binding"

class Response:
    def __init__(self, status: int, retry: str | None = None):
        self.status, self.data = status, b'{"kind": "Status"}' if status >= 400 else b'{"ok": true}'
        self.headers = {"Retry-After": retry} if retry is not None else {}

    def release_conn(self) -> None: ...


class Pool:
    def __init__(self, answers: list[Response]):
        self.answers, self.timeouts = answers, []

    def request(self, method, url, *, timeout, **_):
        self.timeouts.append(timeout.read_timeout)
        return self.answers.pop(0)


class Api:
    """What Kube uses of kubernetes.client.ApiClient."""

    def __init__(self, pool: Pool):
        self.rest_client = type("Rest", (), {"pool_manager": pool})()

    def param_serialize(self, method, path, **_):
        return method, f"https://apiserver{path}", {}, None, None


@pytest.fixture
def slept(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(kube_module.time, "sleep", waits.append)
    return waits


def test_a_throttled_request_is_sent_again_after_its_retry_after(slept):
    pool = Pool([Response(429, "1"), Response(429, "2"), Response(201)])
    assert Kube(Api(pool), request_timeout=30).request("POST", BIND, body={}) == {"ok": True}
    assert slept == [1.0, 2.0] and len(pool.timeouts) == 3


@pytest.mark.parametrize(("answers", "sent"), [
    ([Response(429)], 1),  # no Retry-After: the caller decides
    ([Response(409, "1")], 1),  # a conflict is an answer, whatever it says
    ([Response(503, "1"), Response(500)], 2),  # a 5xx that says Retry-After is sent again, as client-go does
    ([Response(429, "9")], 1),  # past the request's timeout: not waited for
])
def test_a_fault_that_does_not_say_retry_after_or_cannot_wait_is_raised(slept, answers, sent):
    pool = Pool(list(answers))
    with pytest.raises(KubeError) as err:
        Kube(Api(pool), request_timeout=5).request("POST", BIND, body={})
    assert len(pool.timeouts) == sent and err.value.status in (429, 409, 500)


def test_retries_stop_at_the_limit(slept):
    pool = Pool([Response(429, "0") for _ in range(kube_module.MAX_RETRIES + 5)])
    with pytest.raises(KubeError):
        Kube(Api(pool), request_timeout=5).request("GET", "/api/v1/pods")
    assert len(pool.timeouts) == kube_module.MAX_RETRIES + 1


@pytest.mark.parametrize(("status", "header", "wait"), [(429, "3", 3.0), (503, " 1 ", 1.0), (429, "-2", 0.0),
                                                        (429, "Wed, 21 Oct 2026 07:28:00 GMT", None),
                                                        (404, "1", None), (429, None, None)])
def test_retry_after_reads_whole_seconds(status, header, wait):
    assert retry_after(status, header) == wait
