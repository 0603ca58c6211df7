"""Gang timeouts: past scheduleTimeoutSeconds a gang says so, and retries with the fallback minimum if asked."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from preemption_confs import make_conf

from scheduler.testing import ClusterBuilder, cluster, pod_object

CONF = make_conf()


@dataclass(frozen=True)
class Case:
    name: str
    fallback: str | None
    bound_after_timeout: int
    override: int | None


CASES = [
    Case("a 64-pod gang on 48 GPUs falls back to its 32-pod minimum after the timeout and starts", "32", 48, 32),
    Case("without a fallback annotation it only reports the timeout and keeps waiting", None, 0, None),
    Case("a fallback larger than what fits still waits, under the smaller minimum", "56", 0, 56),
]


def build(case: Case) -> ClusterBuilder:
    c = cluster().nodes("n", 6, gpu=8)
    meta: dict[str, object] = {"name": "train", "namespace": "default"}
    if case.fallback is not None:
        meta["annotations"] = {"volcano-py.io/fallback-min-available": case.fallback}
    c.sim.add_podgroup({"metadata": meta, "spec": {"minMember": 64, "scheduleTimeoutSeconds": 600}})
    for i in range(64):
        c.sim.add_pod(pod_object(f"train-{i}", group="train", gpu=1))
    return c


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gang_timeout(case: Case) -> None:
    c = build(case)
    for _ in range(3):
        c.cycle(CONF)
    assert c.sim.bound("train") == {} and c.sim.condition("train", "Timeout") is None
    c.sim.now = 601.0
    c.cycle(CONF)
    c.cycle(CONF)
    timeout = c.sim.condition("train", "Timeout")
    assert timeout is not None and timeout["reason"] == "ScheduleTimeout"
    assert "scheduleTimeoutSeconds 600" in timeout["message"]
    status = c.sim.podgroup("train")["status"]
    assert status.get("minMemberOverride") == case.override
    assert c.sim.podgroup("train")["spec"]["minMember"] == 64, "the spec is never rewritten"
    assert len(c.sim.bound("train")) == case.bound_after_timeout
    warnings = [e for _, e in c.sim.events if e.reason == "ScheduleTimeout"]
    assert len(warnings) == 1, "one Warning event, not one per cycle"
    for _ in range(3):
        c.cycle(CONF)
    assert len([e for _, e in c.sim.events if e.reason == "ScheduleTimeout"]) == 1
