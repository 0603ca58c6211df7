"""The incremental snapshot (adapter/incremental.py) equals a cold `build_snapshot` after every change.

Random deltas on an in-memory cluster: pods added (in a PodGroup, a gang of one, another scheduler's, naming a
PodGroup not there yet, with volume claims), removed, bound, moved to another phase or deleted gracefully; storage
objects added; nodes added, removed, changed, and removed and added again (last in the cluster's order now);
PodGroups added, removed, changed, and removed and added again; queues changed; and now and then a real cycle run on the
incremental snapshot, its binds and evictions applied (so a session's own changes to the infos it was handed
must not leak into the next snapshot). After each, both snapshots are compared as structured values: every
node's idle, used, releasing, pipelined and its tasks in order, every job's fields and its tasks and statuses in
order, the queues, the orphans and the order of nodes and jobs.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from snapshot_values import first_difference, structured

from scheduler.adapter import incremental
from scheduler.api.job import JobInfo
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

CONF = builtin_default_conf()


def same(incremental: ClusterSnapshot, sim: InMemoryCluster) -> str:
    """"" if the incremental snapshot equals a cold one of the cluster, else where they first differ."""
    a, b = structured(incremental), structured(cold(sim))
    return "" if a == b else first_difference(a, b)


def cold(sim: InMemoryCluster) -> ClusterSnapshot:
    builder, sim.changes.builder = sim.changes.builder, None
    try:
        return sim.snapshot()
    finally:
        sim.changes.builder = builder


class World:
    """A small cluster and the random changes made to it, each through the cluster's methods or said to it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sim = sim = InMemoryCluster()
        self.serial = 0
        sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
        sim.add_queue({"metadata": {"name": "q2"}, "spec": {"weight": 2}})
        for _ in range(4):
            self.add_node()
        for _ in range(6):
            self.add_gang()

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.serial}"

    def add_node(self) -> None:
        self.sim.add_node(node_object(self.name("node"), gpu=self.rng.choice((2, 4, 8)), cpu="16", memory="64Gi"))

    def add_gang(self, group: str | None = None) -> None:
        group = group or self.name("pg")
        size = self.rng.randint(1, 4)
        if group not in self.sim.podgroups and f"default/{group}" not in self.sim.podgroups:
            self.sim.add_podgroup({"metadata": {"name": group},
                                   "spec": {"minMember": size, "queue": self.rng.choice(("default", "q2"))},
                                   "status": {"phase": self.rng.choice(("Pending", "Inqueue"))}})
        for _ in range(size):
            self.sim.add_pod(pod_object(self.name("pod"), group=group, gpu=self.rng.choice((0, 1)), cpu="1"))

    def pods(self) -> list[str]:
        return sorted(self.sim.pods)

    def made_again(self, op: str) -> None:
        """A node or PodGroup removed and added again under its name in one delta: the cluster has it last now."""
        rng, sim = self.rng, self.sim
        if op == "node again" and sim.nodes:
            name = rng.choice(sorted(sim.nodes))
            node = sim.nodes.pop(name)
            sim.changes.changed_node(name)
            if rng.random() < 0.5:
                self.add_node()
            sim.add_node(node)
        elif op == "pg again" and sim.podgroups:
            key = rng.choice(sorted(sim.podgroups))
            manifest = copy.deepcopy(sim.podgroups.pop(key).manifest)
            sim.changes.changed_podgroup(key)
            sim.add_podgroup(manifest)

    def change_podgroup(self, manifest: dict[str, Any]) -> None:
        """Its minMember and phase, and now and then what else its owner or the scheduler changes in it: its
        queue, an annotation (the reasons the scheduler publishes, a preemptable mark), its conditions."""
        rng = self.rng
        manifest["spec"]["minMember"] = rng.randint(1, 5)
        manifest["status"]["phase"] = rng.choice(("Pending", "Inqueue", "Running"))
        if rng.random() < 0.4:
            manifest["spec"]["queue"] = rng.choice(("default", "q2"))
        if rng.random() < 0.4:
            annotations = manifest["metadata"].setdefault("annotations", {})
            annotations[rng.choice(("scheduling.volcano-py.io/reasons", "volcano.sh/preemptable"))] = rng.choice(
                ("true", "false", '{"code": "Unschedulable"}'))
        if rng.random() < 0.3:
            manifest["status"]["conditions"] = [{"type": "Unschedulable", "status": "True",
                                                 "reason": "NotEnoughResources", "message": self.name("m")}]

    def step(self) -> str:
        rng, sim = self.rng, self.sim
        ops = ["pod+", "pod+", "plain+", "other+", "other+", "orphan+", "pod-", "bind", "phase", "deleting", "node+",
               "node-", "node~", "node again", "pg+", "pg-", "pg~", "pg again", "queue~", "claim+", "storage+",
               "cycle", "cycle"]
        op = rng.choice(ops)
        pods, nodes = self.pods(), sorted(sim.nodes)
        if op == "pod+":
            self.add_gang(rng.choice(sorted(sim.podgroups)).partition("/")[2] if sim.podgroups else None)
        elif op == "plain+":
            sim.add_pod(pod_object(self.name("plain"), gpu=rng.choice((0, 1))))
        elif op == "other+" and nodes:  # now and then naming a PodGroup (only others' pods in it: not our job)
            group = rng.choice(sorted(sim.podgroups)).partition("/")[2] if sim.podgroups and rng.random() < 0.5 \
                else None
            pod = pod_object(self.name("other"), gpu=rng.choice((0, 1)), scheduler_name="default-scheduler",
                             group=group)
            pod["spec"]["nodeName"] = rng.choice(nodes + ["gone-node"])
            pod["status"] = {"phase": rng.choice(("Running", "Pending"))}
            sim.add_pod(pod)
        elif op == "orphan+":
            sim.add_pod(pod_object(self.name("waits"), group=self.name("later")))
        elif op == "pod-" and pods:
            sim.delete_pod(rng.choice(pods))
        elif op == "bind" and pods and nodes:
            key = rng.choice(pods)
            sim.pods[key].manifest["spec"]["nodeName"] = rng.choice(nodes)
            sim.changes.changed_pod(key)
        elif op == "phase" and pods:
            key = rng.choice(pods)
            sim.pods[key].manifest["status"]["phase"] = rng.choice(("Pending", "Running", "Succeeded", "Failed"))
            sim.changes.changed_pod(key)
        elif op == "deleting" and pods:
            key = rng.choice(pods)
            sim.pods[key].manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            sim.changes.changed_pod(key)
        elif op == "node+":
            self.add_node()
        elif op == "node-" and nodes:
            name = rng.choice(nodes)
            del sim.nodes[name]
            sim.changes.changed_node(name)
        elif op == "node~" and nodes:
            name = rng.choice(nodes)
            sim.add_node(node_object(name, gpu=rng.choice((1, 8)), cpu=rng.choice(("4", "32")), memory="64Gi"))
        elif op in ("node again", "pg again"):
            self.made_again(op)
        elif op == "pg+":
            group = self.name("pg")
            for key in [k for k, p in sim.pods.items() if p.task.job.endswith("/later-" + group.split("-")[1])][:1]:
                sim.changes.changed_pod(key)  # (no pod names it yet: a PodGroup with no pods)
            sim.add_podgroup({"metadata": {"name": group}, "spec": {"minMember": 1}})
        elif op == "pg-" and sim.podgroups:
            key = rng.choice(sorted(sim.podgroups))
            sim.podgroups.pop(key)  # its pods stay: they wait for it (or, bound, only use their node)
            sim.changes.changed_podgroup(key)
        elif op == "pg~" and sim.podgroups:
            key = rng.choice(sorted(sim.podgroups))
            self.change_podgroup(sim.podgroups[key].manifest)
            sim.changes.changed_podgroup(key)
        elif op == "claim+":  # a pending pod with a claim (what it requires follows the storage objects)
            sim.add_pod(pod_object(self.name("claims"), claims=[f"data-{rng.randint(1, 3)}"]))
        elif op == "storage+":  # the first one makes the cluster model volumes from then on
            sim.add_storage(rng.choice([
                {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                 "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
                {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": f"data-{rng.randint(1, 3)}", "namespace": "default"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                          "resources": {"requests": {"storage": "1Gi"}}},
                 "status": {"phase": "Pending"}},
            ]))
        elif op == "queue~":
            sim.add_queue({"metadata": {"name": "q2"}, "spec": {"weight": rng.randint(1, 5)}})
        return op  # "cycle": the test runs it


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_incremental_snapshot_equals_a_cold_one_after_every_delta(seed: int) -> None:
    world = World(random.Random(seed))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    assert same(sim.snapshot(), sim) == ""
    ops = []
    for _ in range(40):
        ops.append(world.step())
        incremental = sim.snapshot()
        assert same(incremental, sim) == "", ops
        op = ops[-1]
        if op == "cycle":  # the session changes the infos it was handed; the next build must not see that
            sim.apply(run_cycle(incremental, CONF))
            if world.rng.random() < 0.5:
                sim.start_bound_pods()


def sim_rules(sim: InMemoryCluster) -> Any:
    from scheduler.adapter.snapshot import AdapterRules

    return AdapterRules(sim.scheduler_names, sim.default_queue)


def test_a_warm_build_rebuilds_only_what_changed() -> None:
    world = World(random.Random(3))
    sim = world.sim
    for _ in range(40):
        world.add_node()
        world.add_gang()
    sim.changes.start(sim_rules(sim))
    sim.snapshot()
    builder = sim.changes.builder
    assert builder is not None
    everything = builder.rebuilt
    key = sorted(sim.pods)[0]
    sim.pods[key].manifest["status"]["phase"] = "Running"
    sim.changes.changed_pod(key)
    assert same(sim.snapshot(), sim) == ""
    assert builder.rebuilt == (1, 1, 0)  # one pod, its job; it is on no node
    assert everything[0] == len(sim.pods) and everything[2] == len(sim.nodes)


def test_a_job_that_only_lost_a_pod_or_changed_its_podgroup_is_its_last_build_made_again_in_place() -> None:
    """The builder's `_reuse`: a job whose pods only went, or whose PodGroup alone changed (its queue, its status
    and an annotation, as a status written and read back with its reasons), is the very JobInfo of the last
    build, its tasks and fields those of a cold build; one a pod joined is made anew."""
    world = World(random.Random(8))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    first = sim.snapshot()
    gangs = [key for key, job in first.jobs.items() if len(job.tasks) >= 2]
    assert len(gangs) >= 2
    lost, changed = gangs[0], gangs[1]
    sim.delete_pod(sorted(first.jobs[lost].tasks)[0])
    manifest = sim.podgroups[changed].manifest
    manifest["spec"]["queue"] = "q2" if first.jobs[changed].queue == "default" else "default"
    manifest["status"]["phase"] = "Running"
    manifest["metadata"].setdefault("annotations", {})["scheduling.volcano-py.io/reasons"] = "{}"
    sim.changes.changed_podgroup(changed)
    second = sim.snapshot()
    assert same(second, sim) == ""
    assert second.jobs[lost] is first.jobs[lost] and len(second.jobs[lost].tasks) == len(first.jobs[lost].tasks)
    assert second.jobs[changed] is first.jobs[changed] and second.jobs[changed].queue == manifest["spec"]["queue"]
    assert second.lineage is not None and {lost, changed} <= second.lineage.jobs  # worked out again by the parts
    world.add_gang(changed.partition("/")[2])  # a pod joins: made anew
    third = sim.snapshot()
    assert same(third, sim) == "" and third.jobs[changed] is not second.jobs[changed]


def test_every_field_a_job_reads_from_its_podgroup_is_taken_by_a_job_made_again_in_place() -> None:
    """`_reuse` takes from the PodGroup as read every field but the builder's and the session's bookkeeping
    (`_KEPT_FIELDS`): exactly the fields `JobInfo.clone` copies (a PodGroup's fields). A field added to JobInfo
    is one or the other; left out of both, a job made again in place would keep a stale value, or lose its
    bookkeeping."""
    names = [f.name for f in dataclasses.fields(JobInfo)]
    marked = JobInfo(**{**{name: object() for name in names}, "tasks": {}})  # type: ignore[arg-type]
    copy_ = marked.clone()
    copied = {name for name in names if getattr(copy_, name) is getattr(marked, name)}
    assert copied == set(incremental._READ_FIELDS)
    assert set(names) - copied == set(incremental._KEPT_FIELDS)


def test_a_build_that_fails_half_way_is_followed_by_one_equal_to_a_cold_one(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(random.Random(5))
    sim = world.sim
    sim.changes.start(sim_rules(sim))
    sim.snapshot()
    builder = sim.changes.builder
    assert builder is not None
    key = sorted(sim.pods)[0]
    sim.pods[key].manifest["status"]["phase"] = "Running"
    sim.changes.changed_pod(key)

    def fault(key: str) -> None:
        raise RuntimeError(f"fault while making job {key}")

    with monkeypatch.context() as patch:
        patch.setattr(builder, "_build_job", fault)
        with pytest.raises(RuntimeError, match="fault while making job"):
            sim.snapshot()
    assert same(sim.snapshot(), sim) == ""
