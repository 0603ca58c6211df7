"""`FeasibilityCache.misfits`, the count allocate records when a task fits no node, is what asking each node's idle
(`reasons.resource_misfit`) would count, on sessions whose nodes were filled, over-filled and emptied through
Statements (the node arrays it reads are kept by the statement's back end)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings, strategies as st

from scheduler.api.reasons import NodeFilter, resource_misfit
from scheduler.api.resources import Resource
from scheduler.cycle import builtin_default_conf
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

FITS = NodeFilter("Fits")


def session(rng: random.Random) -> Session:
    sim = InMemoryCluster()
    sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    for i in range(rng.randint(1, 12)):
        extra = {"example.com/fpga": str(rng.randint(1, 2))} if rng.random() < 0.3 else None
        sim.add_node(node_object(f"n{i}", cpu=str(rng.randint(1, 8)), memory=f"{rng.randint(1, 16)}Gi",
                                 gpu=rng.choice([0, 0, 2, 8]), pods=rng.randint(1, 6), extra=extra))
    for g in range(rng.randint(1, 6)):
        size = rng.randint(1, 6)
        sim.add_podgroup({"metadata": {"name": f"g{g}", "namespace": "ns"},
                          "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Inqueue"}})
        for m in range(size):
            sim.add_pod(pod_object(f"g{g}-{m}", namespace="ns", group=f"g{g}", cpu=str(rng.randint(0, 3)) or None,
                                   memory=f"{rng.randint(1, 4)}Gi", gpu=rng.choice([0, 0, 1, 4])))
    return Session(sim.snapshot(), builtin_default_conf(), PLUGINS)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9))
def test_the_counts_from_the_arrays_are_the_counts_of_asking_each_node(seed: int) -> None:
    rng = random.Random(seed)
    ssn = session(rng)
    tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
    stmt = ssn.statement()
    for task in rng.sample(tasks, k=len(tasks)):  # placed anywhere, fitting or not: room goes negative too
        stmt.allocate(task, rng.choice(ssn.node_list))
    if rng.random() < 0.3:
        stmt.discard()
    for _ in range(20):
        scalars = {}
        if rng.random() < 0.5:
            scalars["nvidia.com/gpu"] = rng.randint(1, 9)
        if rng.random() < 0.3:
            scalars["example.com/fpga"] = rng.randint(1, 3)
        if rng.random() < 0.1:
            scalars["other.io/nobody-offers-it"] = 1
        request = Resource.of(rng.randint(0, 9000), rng.randint(0, 20 * 2**30), rng.randint(0, 3), scalars)
        nodes = rng.sample(ssn.node_list, k=rng.randint(0, len(ssn.node_list)))
        asked = Counter(resource_misfit(request, n.idle) or FITS for n in nodes)
        assert ssn.fit.misfits(request, nodes, FITS) == asked
