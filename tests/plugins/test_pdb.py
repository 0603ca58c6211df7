"""pdb: PodDisruptionBudgets bound what the legacy preempt and reclaim evict, as Volcano's pdb plugin.

The plugin's filter alone, on random candidates and budgets (hypothesis): a PDB never loses more of its pods
than `disruptionsAllowed`, a pod in its `disruptedPods` does not count, a pod with no labels is never offered
(Volcano's rule), a selector that is empty matches nothing. Then seeded random clusters, where a high-priority
pod arrives among low-priority jobs whose pods PDBs cover: with pdb in the conf no eviction takes a PDB's Running
pods below its `minAvailable` (the simulator computes `disruptionsAllowed` as the disruption controller does);
without it, some of the same clusters lose pods a PDB protects.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, strategies as st

from scheduler.api import fields as F
from scheduler.api.disruption import DisruptionBudget, budget_from_object
from scheduler.api.job import TaskInfo
from scheduler.api.resources import Resource
from scheduler.api.selectors import LabelSelector, Requirement
from scheduler.cache.parse import ParseCache
from scheduler.cycle import conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.plugins.pdb import within_budgets
from scheduler.sim.errors import InputError
from scheduler.sim.replay import replay
from scheduler.sim.workload import load_cluster, load_workload
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

APPS = ("a", "b", "c")


# ---- the filter ------------------------------------------------------------------------------------------------

def _task(i: int, namespace: str, app: str | None) -> TaskInfo:
    return TaskInfo(f"{namespace}/p{i}", f"p{i}", namespace, "j", Resource(), labels={"app": app} if app else {})


tasks_st = st.lists(
    st.tuples(st.sampled_from(("ns", "other")), st.sampled_from((None, *APPS))), min_size=0, max_size=12,
).map(lambda specs: [_task(i, ns, app) for i, (ns, app) in enumerate(specs)])

budget_st = st.builds(
    lambda app, allowed, disrupted, ns, op: DisruptionBudget(
        ns, f"pdb-{app}", LabelSelector(match_labels=(("app", app),)) if op == "labels"
        else LabelSelector(match_expressions=(Requirement("app", "In", (app,)),)),
        allowed, frozenset(f"p{i}" for i in disrupted)),
    st.sampled_from(APPS), st.integers(0, 3), st.sets(st.integers(0, 11), max_size=4), st.sampled_from(("ns", "other")),
    st.sampled_from(("labels", "expressions")),
)


@given(tasks_st, st.lists(budget_st, max_size=4))
def test_no_budget_loses_more_than_it_allows_and_disrupted_pods_do_not_count(
    tasks: list[TaskInfo], budgets: list[DisruptionBudget],
) -> None:
    kept = within_budgets(budgets, tasks)
    assert [t for t in tasks if t in kept] == kept, "the order given is kept"
    for pdb in budgets:
        counted = [t for t in kept if pdb.selects(t.namespace, t.labels) and t.name not in pdb.disrupted]
        assert len(counted) <= pdb.allowed, (pdb, counted)
    for task in tasks:
        matching = [b for b in budgets if b.selects(task.namespace, task.labels)]
        if not task.labels:
            assert task not in kept  # Volcano: a pod with no labels is left out of pdb's victims
        elif all(task.name in b.disrupted for b in matching):
            assert task in kept  # no budget it matches counts it: nothing can hold it back
        if task.labels and not matching:
            assert task in kept


def test_a_pod_in_disrupted_pods_is_not_counted_again() -> None:
    """The API counted a pod in status.disruptedPods already: with no disruption left, it may still go, and it
    takes nothing from the budget for the next candidate (Volcano's pdb plugin, plugins/pdb/pdb.go)."""
    counted, fresh = _task(0, "ns", "a"), _task(1, "ns", "a")
    pdb = DisruptionBudget("ns", "pdb-a", LabelSelector(match_labels=(("app", "a"),)), 1, frozenset({"p0"}))
    assert within_budgets([pdb], [counted, fresh]) == [counted, fresh]
    none_left = DisruptionBudget("ns", "pdb-a", LabelSelector(match_labels=(("app", "a"),)), 0, frozenset({"p0"}))
    assert within_budgets([none_left], [counted, fresh]) == [counted]


def test_the_first_candidates_take_the_budget_in_the_order_given() -> None:
    tasks = [_task(i, "ns", "a") for i in range(4)]
    pdb = DisruptionBudget("ns", "pdb", LabelSelector(match_labels=(("app", "a"),)), 2, frozenset({"p0"}))
    assert [t.name for t in within_budgets([pdb], tasks)] == ["p0", "p1", "p2"]


def _pdb_object(selector: Any, status: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "pdb", "namespace": "ns", "resourceVersion": "1"},
                           "spec": {"selector": selector}}
    if status is not None:
        obj["status"] = status
    return obj


def test_an_empty_or_unreadable_selector_matches_nothing_with_a_reason_for_the_unreadable_one() -> None:
    sink: list[F.FieldInvalid] = []
    assert budget_from_object(_pdb_object({}), sink).selector is None and sink == []
    assert budget_from_object(_pdb_object(None), sink).selector is None and sink == []
    bad = budget_from_object(_pdb_object({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}),
                             sink)
    assert bad.selector is None
    assert [(r.path, r.fallback) for r in sink] == [
        ("spec.selector", "matches no pod (as Volcano skips a PDB whose selector it cannot read)")]
    assert not bad.selects("ns", {"app": "1"})


def test_status_is_bounded_and_a_bad_value_protects() -> None:
    sink: list[F.FieldInvalid] = []
    ok = budget_from_object(_pdb_object({"matchLabels": {"app": "a"}},
                                        {"disruptionsAllowed": 2, "disruptedPods": {"p1": "2026-01-01T00:00:00Z"}}))
    assert (ok.allowed, ok.disrupted) == (2, frozenset({"p1"}))
    assert budget_from_object(_pdb_object({"matchLabels": {"app": "a"}}), sink).allowed == 0  # no status yet
    bad = budget_from_object(_pdb_object({"matchLabels": {"app": "a"}}, {"disruptionsAllowed": 2**40}), sink)
    assert bad.allowed == 0 and [r.path for r in sink] == ["status.disruptionsAllowed"]


def test_a_spec_or_status_that_is_no_object_protects_with_a_reason() -> None:
    sink: list[F.FieldInvalid] = []
    bad = budget_from_object({"metadata": {"name": "p", "namespace": "ns"}, "spec": "x"}, sink)
    assert (bad.selector, bad.allowed) == (None, 0) and [r.path for r in sink] == ["spec.selector"]
    sink.clear()
    bad = budget_from_object({"metadata": {"name": "p", "namespace": "ns"},
                              "spec": {"selector": {"matchLabels": {"app": "a"}}}, "status": ["x"]}, sink)
    assert bad.allowed == 0 and [r.path for r in sink] == ["status.disruptionsAllowed"]


def test_a_volcano_conf_naming_pdb_and_cdp_loads_them() -> None:
    loaded = conf_from_text("actions: \"enqueue, allocate, preempt, reclaim, backfill\"\ntiers:\n- plugins: "
                            "[{name: priority}, {name: gang}, {name: conformance}, {name: pdb}, {name: cdp}]\n",
                            source="volcano.conf")
    assert tuple(loaded.skipped) == ()  # they were skipped ("a Volcano plugin volcano-py does not implement")
    assert [p.name for p in loaded.tiers[0].plugins] == ["priority", "gang", "conformance", "pdb", "cdp"]


def test_the_cache_reads_pdbs_and_logs_a_bad_one_once() -> None:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    good = _pdb_object({"matchLabels": {"app": "a"}}, {"disruptionsAllowed": 1})
    broken = {"metadata": {"namespace": "ns"}}
    budgets = cache.disruption_budgets([good, broken])
    assert [(b.namespace, b.name, b.allowed) for b in budgets] == [("ns", "pdb", 1)]
    assert [r.path for r in cache.problems[("PodDisruptionBudget", "ns/None")]] == ["metadata.name"]


# ---- seeded clusters -----------------------------------------------------------------------------------------

def conf(*, pdb: bool) -> SchedulerConf:
    first: list[Any] = ["priority", "gang", "conformance"]
    if pdb:
        first.append("pdb")
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion",
                                   "nodeorder"], actions="enqueue, allocate, preempt, backfill")


def build(seed: int) -> tuple[ClusterBuilder, dict[str, int]]:
    """Nodes of 4 GPUs full of low-priority elastic jobs whose pods carry an `app` label; a PDB per app with a
    random minAvailable (the simulator computes its disruptionsAllowed from the Running pods)."""
    rng = random.Random(seed)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    nodes = rng.randint(1, 2)
    c.nodes("n", nodes, gpu=4)
    left, j = 4 * nodes, 0
    while left > 0:
        replicas = min(left, rng.randint(1, 4))
        name = f"low{j}"
        c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                            "spec": {"minMember": 1, "priorityClassName": "low"}})
        for i in range(replicas):
            pod = pod_object(f"{name}-{i}", group=name, gpu=1, priority_class="low")
            pod["metadata"]["labels"] = {"app": rng.choice(APPS)}
            c.sim.add_pod(pod)
            c.sim.now += 1
        left -= replicas
        j += 1
    minimums = {app: rng.randint(0, 3) for app in APPS if rng.random() < 0.8}
    for app, minimum in minimums.items():
        c.sim.add_pdb({"metadata": {"name": f"pdb-{app}", "namespace": "default"},
                       "spec": {"minAvailable": minimum, "selector": {"matchLabels": {"app": app}}}})
    c.cycle(conf(pdb=True))
    return c, minimums


def running_per_app(c: ClusterBuilder) -> dict[str, int]:
    out = dict.fromkeys(APPS, 0)
    for pod in c.sim.pods.values():
        app = pod.task.labels.get("app")
        if app and pod.manifest["status"]["phase"] == "Running":
            out[app] += 1
    return out


def preempt(seed: int, *, pdb: bool) -> tuple[dict[str, int], dict[str, int], dict[str, int], list[str]]:
    c, minimums = build(seed)
    before = running_per_app(c)
    rng = random.Random(seed + 10_000)
    for k in range(rng.randint(1, 3)):  # one single-pod preemptor per cycle
        c.job(f"high{k}", gpu=rng.randint(1, 2), priority_class="high")
        c.cycle(conf(pdb=pdb))
    return minimums, before, running_per_app(c), list(c.sim.evicted)


SEEDS = range(40)


def test_with_pdb_no_eviction_takes_a_budget_below_its_minimum_and_without_it_some_do() -> None:
    broken_without = 0
    for seed in SEEDS:
        minimums, before, after, evicted = preempt(seed, pdb=True)
        for app, minimum in minimums.items():
            assert after[app] >= min(minimum, before[app]), (seed, app, minimum, before, after, evicted)
        minimums, before, after, _ = preempt(seed, pdb=False)
        broken_without += any(after[app] < min(m, before[app]) for app, m in minimums.items())
    assert broken_without >= 5, broken_without


def test_a_pdb_with_no_disruption_allowed_keeps_the_preemptor_waiting() -> None:
    c = cluster().priority_class("low", 10).priority_class("high", 1000).node("n0", gpu=2)
    c.sim.add_podgroup({"metadata": {"name": "low", "namespace": "default"},
                        "spec": {"minMember": 1, "priorityClassName": "low"}})
    for i in range(2):
        pod = pod_object(f"low-{i}", group="low", gpu=1, priority_class="low")
        pod["metadata"]["labels"] = {"app": "db"}
        c.sim.add_pod(pod)
        c.sim.now += 1
    c.sim.add_pdb({"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": {"app": "db"}}},
                   "status": {"disruptionsAllowed": 0}})
    c.cycle(conf(pdb=True))
    c.job("high", gpu=1, priority_class="high")
    c.cycles(2, conf(pdb=True))
    assert c.sim.evicted == [] and c.sim.bound("high") == {}
    c.cycle(conf(pdb=False))
    assert c.sim.evicted == ["default/low-1"]


# ---- the simulator's files -----------------------------------------------------------------------------------

def _job(name: str, arrival: int, replicas: int, priority_class: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"arrival": arrival, "duration": 600, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name},
            "spec": {"minAvailable": 1, "schedulerName": "volcano-py", "queue": "default",
                     "priorityClassName": priority_class,
                     "tasks": [{"replicas": replicas, "name": "worker", "template": {
                         "metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "w", "image": "x",
                                                  "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}]}}


def test_a_cluster_file_pdb_protects_pods_in_a_replay(tmp_path: Path) -> None:
    """`podDisruptionBudgets:` in the cluster file: with minAvailable 4 over the 4 pods of `db`, the high-priority
    job waits for `db` to finish under a conf with pdb, and preempts at once without it (then it starts once its
    victim's 30 s grace period, the simulator's default, has run: arrival 10 s + 30 s + a few cycles)."""
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump({
        "nodes": [{"name": "gpu", "count": 1, "gpu": 4}], "priorityClasses": {"low": 10, "high": 1000},
        "podDisruptionBudgets": [{"metadata": {"name": "db"},
                                  "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "db"}}}}]}))
    workload_file = tmp_path / "workload.yaml"
    workload_file.write_text(yaml.safe_dump({"jobs": [_job("db", 0, 4, "low", {"app": "db"}),
                                                       _job("urgent", 10, 1, "high", {"app": "urgent"})]}))
    spec, workload = load_cluster(cluster_file), load_workload(workload_file)
    assert [p["metadata"]["name"] for p in spec.pdbs] == ["db"]

    def started(pdb: bool) -> float | None:
        outcome = replay(spec, workload, conf(pdb=pdb), horizon=2000)
        return next(r.started for r in outcome.runs if r.item.name == "urgent")

    with_pdb, without = started(True), started(False)
    assert with_pdb is not None and with_pdb >= 600
    assert without is not None and without < 10 + 30 + 5


def test_a_pdb_the_simulator_cannot_compute_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "n", "gpu": 1}], "podDisruptionBudgets": [
        {"metadata": {"name": "ok"}, "spec": {"minAvailable": 1}},
        {"metadata": ["x"], "spec": {"minAvailable": "50%"}}]}))
    with pytest.raises(InputError, match=r"podDisruptionBudgets\[1\]: .*metadata.name"):
        load_cluster(path)
    c = cluster()
    with pytest.raises(ValueError, match="spec.minAvailable"):
        c.sim.add_pdb({"metadata": {"name": "pct"}, "spec": {"minAvailable": "50%"}})
    with pytest.raises(ValueError, match="spec.selector"):
        c.sim.add_pdb({"metadata": {"name": "bad"}, "spec": {"selector": {"matchExpressions": [{"key": "a"}]}}})


def reclaim_conf(*, pdb: bool) -> SchedulerConf:
    """pdb in the first tier; proportion's Reclaimable off, so no later tier answers what pdb refused (with it on,
    proportion's tier would decide once pdb offers nothing: Volcano's tier rule, framework/points.py)."""
    first: list[Any] = ["priority", "gang", "conformance"]
    if pdb:
        first.append("pdb")
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates",
                                   {"name": "proportion", "enableReclaimable": False}, "nodeorder"],
                           actions="enqueue, allocate, reclaim, backfill")


def test_reclaim_keeps_within_the_budget_too() -> None:
    c = cluster().node("n0", gpu=4)
    c.queue("batch").queue("team")
    c.sim.add_podgroup({"metadata": {"name": "fill", "namespace": "default"},
                        "spec": {"minMember": 1, "queue": "batch"}})
    for i in range(4):
        pod = pod_object(f"fill-{i}", group="fill", gpu=1)
        pod["metadata"]["labels"] = {"app": "db" if i < 3 else "web"}
        c.sim.add_pod(pod)
        c.sim.now += 1
    c.sim.add_pdb({"metadata": {"name": "db"}, "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "db"}}}})
    c.cycle(reclaim_conf(pdb=True))
    c.job("late", queue="team", replicas=2, min_available=2, gpu=1)
    c.cycles(3, reclaim_conf(pdb=True))
    assert c.sim.evicted == [], "the web pod alone cannot make room for two; db's three are its minimum"
    c.cycles(2, reclaim_conf(pdb=False))
    assert len(c.sim.evicted) == 2 and len(c.sim.bound("late")) == 2
