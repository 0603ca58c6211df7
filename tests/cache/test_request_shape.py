"""A pod's request is computed once per distinct set of the fields that decide it (cache/parse.py
`_request_shape`): pods that share their one container's resources but add init containers or an overhead must
not share its request, whichever of them is read first."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from scheduler.cache.parse import ParseCache


def pod(name: str, **extra: Any) -> dict[str, Any]:
    spec = {"schedulerName": "default-scheduler", "nodeName": "n1",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}], **extra}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}, "spec": spec,
            "status": {"phase": "Running"}}


PODS = {
    "plain": pod("plain"),
    "init": pod("init", initContainers=[{"name": "i", "resources": {"requests": {"cpu": "4"}}}]),
    "overhead": pod("overhead", overhead={"cpu": "1"}),
    "two": pod("two", containers=[{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                  {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]),
}
CPU_MILLIS = {"plain": 1000, "init": 4000, "overhead": 2000, "two": 2000}


@pytest.mark.parametrize("first", sorted(PODS))
def test_each_pod_gets_its_own_request_whichever_is_read_first(first: str) -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    order = [first] + [n for n in sorted(PODS) if n != first]
    seen = {}
    for name in order:
        task = cache.task(copy.deepcopy(PODS[name]), {})
        assert task is not None
        seen[name] = task.resreq.cpu
    assert seen == CPU_MILLIS
