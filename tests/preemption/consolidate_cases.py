"""Shared builders for the consolidate action's tests: running jobs pinned to nodes, and the conf."""

from __future__ import annotations

from typing import Any

from scheduler.actions.movable import MOVABLE
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, conf_from_tiers, pod_object

WITH = "enqueue, allocate, consolidate, backfill"
WITHOUT = "enqueue, allocate, backfill"
FIRST_TIER = ("priority", "gang", "conformance")
SECOND_TIER = ("drf", "predicates", "proportion", "nodeorder")
# the starvation guard off: it would reserve for the pending gang and so change what consolidate finds
NO_STARVATION_GUARD = {"allocate": {"starvationThresholdSeconds": -1}}


def conf(actions: str = WITH, consolidate: dict[str, Any] | None = None,
         minruntime: dict[str, Any] | None = None) -> SchedulerConf:
    first: list[Any] = list(FIRST_TIER)
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    configurations: dict[str, dict[str, Any]] = dict(NO_STARVATION_GUARD)
    if consolidate is not None:
        configurations["consolidate"] = consolidate
    return conf_from_tiers(first, [*SECOND_TIER, "binpack"], actions=actions, configurations=configurations)



def pod(job: str, index: int, gpu: int, mark: dict[str, str] | None) -> dict[str, Any]:
    made = pod_object(f"{job}-{index}", group=job, gpu=gpu)
    made["metadata"]["annotations"].update(mark if mark is not None else {MOVABLE: "true"})
    return made


def running(c: ClusterBuilder, job: str, nodes: list[str], gpu: int, *, mark: dict[str, str] | None = None,
            since: float | None = None) -> None:
    """A running job with one pod of `gpu` GPUs on each of `nodes`, marked movable unless `mark` says otherwise."""
    c.sim.add_podgroup({"metadata": {"name": job, "namespace": "default"},
                        "spec": {"minMember": len(nodes), "queue": "default"}, "status": {"phase": "Running"}})
    for i, node in enumerate(nodes):
        made = pod(job, i, gpu, mark)
        made["spec"]["nodeName"] = node
        made["status"]["phase"] = "Running"
        if since is not None:
            stamp = f"1970-01-01T00:{int(since) // 60:02d}:{int(since) % 60:02d}Z"
            made["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                             "lastTransitionTime": stamp}]
        c.sim.add_pod(made)


def recreate(c: ClusterBuilder, pod_key: str, gpu: int) -> None:
    """What the moved job's controller does once its old pod is gone: the same pod, pending."""
    name = pod_key.split("/")[1]
    job = name.rsplit("-", 1)[0]
    c.sim.add_pod(pod(job, int(name.rsplit("-", 1)[1]), gpu, None))
