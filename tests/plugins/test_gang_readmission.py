"""A gang that lost a pod is admitted again for what it lacks, not for its whole minResources.

A running gang one pod short (its pod deleted and recreated by its controller) goes back to Pending and through
enqueue again. Its running pods already count in its queue's allocated (and in the nodes' use), so counting its
whole minResources on top counts them twice: in a queue sized for the gang the replacement pod was then never
admitted and the gang stayed one pod short for ever. Volcano's proportion JobEnqueueable
(pkg/scheduler/plugins/proportion/proportion.go) adds the whole minResources; volcano-py counts the part of it
the job does not hold yet, as it already does for admitted jobs (shares.reserved_by_admitted).
"""

from __future__ import annotations

import pytest

from scheduler.sim.objects import pod_object
from scheduler.testing import cluster, conf_from_tiers

GPU = "nvidia.com/gpu"

CONFS = {
    "proportion": None,  # the default tiers
    "capacity": conf_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "capacity", "nodeorder"]),
    "overcommit": conf_from_tiers(["priority", "gang", "conformance"], ["overcommit", "drf", "predicates",
                                                                          "nodeorder"]),
}


@pytest.mark.parametrize("plugin", sorted(CONFS))
@pytest.mark.parametrize("size", [2, 3, 5])
def test_a_gang_one_pod_short_is_admitted_again_in_a_queue_sized_for_it(plugin: str, size: int) -> None:
    """Queue capability (or, for overcommit, the cluster at factor 1) exactly the gang's minResources."""
    gpus = 2 * size
    conf = CONFS[plugin]
    c = cluster().nodes("n", size, gpu=2).queue("team", capability={GPU: gpus}, **(
        {"deserved": {GPU: gpus}} if plugin == "capacity" else {}))
    c.job("gang", queue="team", replicas=size, gpu=2, min_resources={GPU: gpus})
    c.cycle(conf)
    assert len(c.sim.bound("gang")) == size
    c.cycle(conf)
    assert c.sim.podgroup("gang")["status"]["phase"] == "Running"
    c.sim.delete_pod("default/gang-0")
    # One pod short of minMember with no Unschedulable condition of this session, the PodGroup is Pending
    # (framework/results.py podgroup_phase, Volcano's getPodGroupPhase): as a scheduler that restarted finds it.
    c.sim.podgroups["default/gang"].manifest["status"]["phase"] = "Pending"
    c.sim.add_pod(pod_object("gang-0-again", group="gang", gpu=2))
    c.cycle(conf)
    bound = c.sim.bound("gang")
    assert "gang-0-again" in bound, (plugin, c.sim.podgroup("gang")["status"], c.sim.reasons("gang"))
    assert len(bound) == size
    assert c.sim.reasons("gang") == ()  # no queue limit was ever reported for it
