"""The scheduler writes PodGroup status on either set of CRDs (issue 16): Volcano's PodGroup CRD (and ours now) has
no status subresource, ours had one. A fake apiserver plays each; the status must land either way."""

from __future__ import annotations

import contextlib
import copy
import threading
from dataclasses import replace
from typing import Any

import pytest
import urllib3

from scheduler.api.decision import REASONS_ANNOTATION, Code, Status, read_published
from scheduler.api.job import Condition
from scheduler.api.phases import PodGroupPhase
from scheduler.api.reasons import ResourceShortfall
from scheduler.api.resources import GPU
from scheduler.api.snapshot import PodGroupStatus
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import KubeError

PROBE_HOLD = 0.5  # seconds a probe of /status waits for a concurrent one
PATH = "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/pg"


class FakeApiserver:
    """One PodGroup, served as the apiserver serves a CRD with or without the status subresource."""

    def __init__(self, subresource: bool, exists: bool = True):
        self.subresource = subresource
        self.obj: dict[str, Any] | None = (
            {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 1}} if exists else None)
        self.calls: list[str] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append(path.removeprefix(PATH) or "object")
        if self.obj is None or (path.endswith("/status") and not self.subresource):
            raise KubeError(404, method, path, b'{"message": "not found"}')
        if "metadata" in body and not path.endswith("/status"):  # a merge patch: null removes a key (/status
            annotations = self.obj["metadata"].setdefault("annotations", {})  # takes no metadata)
            for key, value in body["metadata"]["annotations"].items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
        # the object ignores status under a subresource
        if "status" in body and (path.endswith("/status") or not self.subresource):
            self.obj["status"] = {**(self.obj.get("status") or {}), **body["status"]}
        return copy.deepcopy(self.obj)


def cache_on(server: FakeApiserver) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1_000_000.0)
    cache.kube = server  # type: ignore[assignment]
    cache.podgroups.objects["ns/pg"] = {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 1}}
    return cache


def write(cache: ClusterCache, phase: PodGroupPhase, running: int) -> None:
    cache.status_writer._write_podgroup(PodGroupStatus("ns/pg", phase, (), running, 0, 0), 1_000_000.0)


@pytest.mark.parametrize("subresource", [True, False], ids=["our old CRD (/status)", "Volcano's CRD (no /status)"])
def test_the_status_lands_on_either_crd(subresource: bool) -> None:
    server = FakeApiserver(subresource)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)
    write(cache, PodGroupPhase.RUNNING, 2)
    assert server.obj is not None
    assert (server.obj["status"]["phase"], server.obj["status"]["running"]) == ("Running", 2)
    assert cache.podgroups.objects["ns/pg"]["status"]["phase"] == "Running"


def test_without_a_subresource_status_is_probed_once_then_written_through_the_object() -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)
    write(cache, PodGroupPhase.RUNNING, 1)
    assert server.calls == ["/status", "object", "object"]


def test_a_subresource_that_comes_back_is_used_again() -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)
    server.subresource = True  # the CRD was switched back mid-run
    write(cache, PodGroupPhase.RUNNING, 1)
    assert server.obj is not None and server.obj["status"]["phase"] == "Running"
    write(cache, PodGroupPhase.RUNNING, 2)
    assert server.calls == ["/status", "object", "object", "/status", "/status"]
    assert server.obj["status"]["running"] == 2


def test_a_podgroup_gone_is_not_mistaken_for_a_missing_subresource() -> None:
    server = FakeApiserver(subresource=True, exists=False)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)  # logged and retried next cycle, as before
    server.obj = {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {}}
    write(cache, PodGroupPhase.INQUEUE, 0)
    assert server.calls == ["/status", "object", "/status"]


SHORT = Status(Code.UNSCHEDULABLE, (ResourceShortfall(GPU, 8_000, 5_000, tasks=8, nodes=1),), "gang")


@pytest.mark.parametrize("subresource", [True, False], ids=["our old CRD (/status)", "Volcano's CRD (no /status)"])
def test_the_reasons_are_published_on_the_object_and_removed_once_scheduled(subresource: bool) -> None:
    server = FakeApiserver(subresource)
    cache = cache_on(server)
    write_status = cache.status_writer._write_podgroup
    held = Condition("Unschedulable", "True", "NotEnoughResources", "short")
    write_status(PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT),
          1_000_000.0)
    assert server.obj is not None
    assert read_published(server.obj["metadata"]["annotations"][REASONS_ANNOTATION]) == SHORT
    calls = len(server.calls)
    write_status(PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT),
          1_000_000.0)
    assert len(server.calls) == calls, "an unchanged decision is not written again"
    scheduled = Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", "")
    write_status(PodGroupStatus("ns/pg", PodGroupPhase.RUNNING, (scheduled,), 8, 0, 0), 1_000_000.0)
    assert REASONS_ANNOTATION not in server.obj["metadata"]["annotations"]


SCHEDULED = Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", "")


@pytest.mark.parametrize("subresource", [True, False], ids=["our old CRD (/status)", "Volcano's CRD (no /status)"])
def test_a_status_and_its_reasons_go_in_one_request_through_the_object(subresource: bool) -> None:
    """Without a status subresource the status goes through the object, and the reasons annotation with it: one
    write (and one watch event) where there were two; through /status, which takes no metadata, two."""
    server = FakeApiserver(subresource)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)  # (finds where status goes)
    server.calls.clear()
    held = Condition("Unschedulable", "True", "NotEnoughResources", "short")
    cache.status_writer._write_podgroup(
        PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT), 1_000_000.0)
    assert server.obj is not None
    assert read_published(server.obj["metadata"]["annotations"][REASONS_ANNOTATION]) == SHORT
    assert server.obj["status"]["conditions"][0]["type"] == "Unschedulable"
    assert server.calls == (["object", "/status"] if subresource else ["object"])
    stored = cache.podgroups.objects["ns/pg"]
    assert REASONS_ANNOTATION in stored["metadata"]["annotations"] and stored["status"]["conditions"]
    server.calls.clear()  # scheduled: the status changes and the annotation goes, in one request again
    cache.status_writer._write_podgroup(PodGroupStatus("ns/pg", PodGroupPhase.RUNNING, (SCHEDULED,), 1, 0, 0),
                                        1_000_000.0)
    assert REASONS_ANNOTATION not in server.obj["metadata"]["annotations"]
    assert server.obj["status"]["phase"] == "Running"
    assert server.calls == (["object", "/status"] if subresource else ["object"])


def test_reasons_that_change_under_an_unchanged_status_are_written_alone() -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    held = Condition("Unschedulable", "True", "NotEnoughResources", "short")
    first = PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT)
    cache.status_writer._write_podgroup(first, 1_000_000.0)
    other = Status(Code.UNSCHEDULABLE, (ResourceShortfall(GPU, 16_000, 5_000, tasks=16, nodes=2),), "gang")
    server.calls.clear()
    cache.status_writer._write_podgroup(replace(first, decision=other), 1_000_000.0)
    assert server.calls == ["object"]
    assert server.obj is not None and read_published(server.obj["metadata"]["annotations"][REASONS_ANNOTATION]) == other


def test_a_status_write_that_changes_nothing_is_not_sent() -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    status = PodGroupStatus("ns/pg", PodGroupPhase.RUNNING, (SCHEDULED,), 3, 0, 0)
    cache.status_writer.write_podgroups([status], 1_000_000.0)
    calls = list(server.calls)
    cache.status_writer.write_podgroups([status], 1_000_005.0)  # the next cycle, the same status
    assert calls == ["/status", "object"] and server.calls == calls


@pytest.mark.parametrize(("failed", "phase"), [({}, "Running"), ({"ns/pg": 1}, "Inqueue")],
                         ids=["every bind landed", "a bind failed"])
def test_a_gang_whose_binds_landed_is_written_running_in_one_write(failed: dict[str, int], phase: str) -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    server.calls.clear()
    binding = PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (SCHEDULED,), 0, 0, 0,
                             phase_when_bound=PodGroupPhase.RUNNING)
    cache.status_writer.write_podgroups([binding], 1_000_000.0, failed)
    assert server.obj is not None and server.obj["status"]["phase"] == phase
    assert cache.podgroups.objects["ns/pg"]["status"]["phase"] == phase
    writes = len(server.calls)
    # the next cycle sees the pods bound and computes Running: nothing left to write when it was written already
    cache.status_writer.write_podgroups([PodGroupStatus("ns/pg", PodGroupPhase.RUNNING, (SCHEDULED,), 0, 0, 0)],
                                        1_000_001.0)
    assert len(server.calls) == writes + (0 if phase == "Running" else 1)


def test_the_first_write_alone_finds_where_status_goes_then_the_rest_go_through_the_object() -> None:
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    for name in ("pg2", "pg3"):
        cache.podgroups.objects[f"ns/{name}"] = {"metadata": {"name": name, "namespace": "ns"}, "spec": {}}
    paths: list[str] = []
    request = server.request
    # A /status answer is held until a second /status request is in flight (or PROBE_HOLD has passed), so that
    # writes sent together all reach /status before the first 404 is seen, as on a real apiserver's latency.
    together = threading.Barrier(2, timeout=PROBE_HOLD)

    def record(method: str, path: str, **kw: Any) -> dict[str, Any]:
        paths.append(path.rsplit("/", 1)[-1])
        if path.endswith("/status"):
            with contextlib.suppress(threading.BrokenBarrierError):
                together.wait()
        if not path.startswith(PATH):  # pg2, pg3: served as the one object of the fake
            path = PATH + ("/status" if path.endswith("/status") else "")
        return request(method, path, **kw)

    server.request = record  # type: ignore[method-assign]
    cache.status_writer.write_podgroups([PodGroupStatus(f"ns/{n}", PodGroupPhase.INQUEUE, (), 0, 0, 0)
                                         for n in ("pg", "pg2", "pg3")], 1_000_000.0)
    assert paths.count("status") == 1, "every concurrent first write probed /status"


def test_a_podgroup_whose_annotations_are_not_a_map_still_gets_its_status_and_reasons() -> None:
    """Careless input: annotations written as a list (no apiserver serves that, a hand-made store may hold it).
    The reasons are taken as absent, so they are written, with the status, in one request."""
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    write(cache, PodGroupPhase.INQUEUE, 0)
    assert server.obj is not None
    cache.podgroups.objects["ns/pg"]["metadata"]["annotations"] = ["not", "a", "map"]
    server.calls.clear()
    held = Condition("Unschedulable", "True", "NotEnoughResources", "short")
    cache.status_writer._write_podgroup(
        PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT), 1_000_000.0)
    assert server.calls == ["object"]
    assert read_published(server.obj["metadata"]["annotations"][REASONS_ANNOTATION]) == SHORT


def test_a_reasons_write_lost_in_transport_is_logged_and_the_writer_goes_on() -> None:
    """The reasons alone (the status unchanged) and the connection drops (urllib3's error, not an OSError): the
    write is given up for this cycle, the next PodGroup's status is still written."""
    server = FakeApiserver(subresource=False)
    cache = cache_on(server)
    held = Condition("Unschedulable", "True", "NotEnoughResources", "short")
    first = PodGroupStatus("ns/pg", PodGroupPhase.INQUEUE, (held,), 0, 0, 0, decision=SHORT)
    cache.status_writer._write_podgroup(first, 1_000_000.0)
    request = server.request

    def dropped(method: str, path: str, **kw: Any) -> dict[str, Any]:
        raise urllib3.exceptions.ProtocolError("connection dropped")

    server.request = dropped  # type: ignore[method-assign]
    other = Status(Code.UNSCHEDULABLE, (ResourceShortfall(GPU, 16_000, 5_000, tasks=16, nodes=2),), "gang")
    cache.status_writer._write_podgroup(replace(first, decision=other), 1_000_000.0)  # no exception
    server.request = request  # type: ignore[method-assign]
    write(cache, PodGroupPhase.RUNNING, 1)
    assert server.obj is not None and server.obj["status"]["phase"] == "Running"
