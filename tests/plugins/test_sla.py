"""`sla`: a job that has waited past its `sla-waiting-time` goes first and is admitted (Volcano's sla plugin)."""

from __future__ import annotations

import pytest

from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cycle import run_cycle
from scheduler.framework.conf import ConfError
from scheduler.sim.objects import pod_object
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"


def conf(waiting: str | None = None) -> object:
    sla: dict[str, object] = {"name": "sla"}
    if waiting is not None:
        sla["arguments"] = {"sla-waiting-time": waiting}
    return conf_from_tiers((sla,), ("priority", "gang", "conformance"), ("predicates", "proportion"))


def gang(c: ClusterBuilder, name: str, gpus: int, *, waiting: str | None = None, min_resources: bool = False,
         queue: str = "default") -> None:
    meta: dict[str, object] = {"name": name, "namespace": "default"}
    if waiting:
        meta["annotations"] = {"sla-waiting-time": waiting}
    spec: dict[str, object] = {"minMember": gpus, "queue": queue}
    if min_resources:
        spec["minResources"] = {GPU: gpus}
    c.sim.add_podgroup({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})
    for i in range(gpus):
        c.sim.add_pod(pod_object(f"{name}-{i}", group=name, gpu=1))


def test_a_job_with_an_sla_goes_before_an_older_one_without() -> None:
    c = cluster().node("n", gpu=8)
    gang(c, "old", 8)
    c.sim.now += 5
    gang(c, "urgent", 8, waiting="10m")
    c.cycle(conf())
    assert c.sim.used_gpus("urgent") == 8000 and c.sim.used_gpus("old") == 0


def test_between_two_slas_the_earlier_deadline_goes_first() -> None:
    c = cluster().node("n", gpu=8)
    gang(c, "relaxed", 8, waiting="1h")
    c.sim.now += 5
    gang(c, "tight", 8, waiting="1m")
    c.cycle(conf())
    assert c.sim.used_gpus("tight") == 8000


def test_past_its_waiting_time_a_job_held_by_its_queue_is_admitted() -> None:
    c = cluster().node("n", gpu=8).queue("capped", capability={GPU: 4})
    gang(c, "big", 8, min_resources=True, queue="capped")
    c.cycle(conf("30s"))
    assert c.sim.podgroup("default/big")["status"]["phase"] == "Pending"  # within its SLA: the queue holds it
    c.sim.now += 60
    c.cycle(conf("30s"))
    assert c.sim.podgroup("default/big")["status"]["phase"] == "Inqueue"


def test_a_bad_waiting_time_is_a_conf_error_naming_the_argument() -> None:
    with pytest.raises(ConfError, match=r"tiers\[0\]\.plugins\[0\]\.arguments\.sla-waiting-time"):
        run_cycle(ClusterSnapshot({}, {}, {}), conf("soon"))


def test_a_waiting_time_that_is_not_positive_is_a_conf_error_too() -> None:
    with pytest.raises(ConfError, match="positive duration"):
        run_cycle(ClusterSnapshot({}, {}, {}), conf("0s"))
