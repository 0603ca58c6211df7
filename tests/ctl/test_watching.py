"""`--watch`'s loop (scheduler/cli/ctl/watching.py): a row per change, the watch started again where it ended, and a
new list when the apiserver says the version is too old (410). The apiserver's behaviour itself is exercised in
tests/e2e/test_ctl_kubectl_habits.py."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cli.ctl.client import Client
from scheduler.cli.ctl.watching import watch


class Streams:
    """What `Client.kube` answers: one scripted stream per watch, and a list."""

    def __init__(self, streams: list[list[dict[str, Any]]], listed: dict[str, Any]):
        self.streams, self.listed, self.queries = streams, listed, []

    def stream(self, path: str, query: dict[str, str], read_timeout: float) -> Any:
        self.queries.append(dict(query))
        yield from self.streams.pop(0)

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return self.listed


def obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


def test_each_change_is_a_row_and_a_410_relists(capsys: pytest.CaptureFixture[str]) -> None:
    kube = Streams([
        [{"type": "ADDED", "object": obj("a", "5")}, {"type": "BOOKMARK", "object": obj("", "6")},
         {"type": "MODIFIED", "object": obj("a", "7")}],  # ends: the apiserver's timeout
        [{"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
        [{"type": "DELETED", "object": obj("b", "12")}],
    ], {"items": [obj("b", "10")], "metadata": {"resourceVersion": "11"}})
    watch(Client(kube), "/apis/x/v1/things", "app=web", "4", lambda o: f"{o['metadata']['name']}\n", rounds=3)
    assert capsys.readouterr().out == "a\na\nb\nb\n"  # two changes of a; b from the new list; b deleted
    assert [q.get("resourceVersion") for q in kube.queries] == ["4", "7", "11"]
    assert all(q["labelSelector"] == "app=web" and q["watch"] == "true" for q in kube.queries)


def test_a_watch_error_other_than_410_ends_the_command() -> None:
    from scheduler.cache.kube import KubeError

    kube = Streams([[{"type": "ERROR", "object": {"code": 403, "message": "forbidden"}}]], {})
    with pytest.raises(KubeError):
        watch(Client(kube), "/apis/x/v1/things", None, "1", lambda o: "", rounds=1)


def test_the_list_is_out_before_the_watch_waits() -> None:
    """stdout to a pipe is block-buffered: the list printed before the watch must be flushed, or a reader sees
    nothing until the first change."""
    import sys

    class Recorder:
        def __init__(self) -> None:
            self.flushed = False

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            self.flushed = True

    class Waits(Streams):
        def stream(self, path: str, query: dict[str, str], read_timeout: float) -> Any:
            assert recorder.flushed, "the watch waits with the list still in the buffer"
            yield from ()

    recorder = Recorder()
    saved, sys.stdout = sys.stdout, recorder  # type: ignore[assignment]
    try:
        watch(Client(Waits([], {})), "/apis/x/v1/things", None, "1", lambda o: "", rounds=1)
    finally:
        sys.stdout = saved
