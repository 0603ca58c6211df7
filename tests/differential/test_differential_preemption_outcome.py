"""The preemption family's observation (evictions from the pod watch), comparison, coverage and report, on
hand-built pods, outcome dicts and records (no cluster)."""

import json

from differential import preemption_report, report
from differential.preemption import MAX_DOMAINS, TARGETS, generate
from differential.preemption_outcome import EvictionLog, compare, coverage, coverage_of, verdict


def _seed_where(pred):
    return next(s for s in range(1, 400) if pred(generate(s)))


def _pod(job, task, i, uid, node="n0", phase="Running", evicted=False, reason="PreemptionByScheduler"):
    pod = {
        "metadata": {"name": f"{job}-{task}-{i}", "uid": uid,
                     "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": task}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": []},
    }
    if evicted:
        pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": reason})
    return pod


def test_eviction_log_counts_scheduler_evictions_once_per_uid_and_sees_a_gang_break():
    wl = generate(_seed_where(lambda w: w.gangs[0].min_member == w.gangs[0].replicas >= 2))
    victim = wl.gangs[0]
    n = victim.replicas
    log = EvictionLog(wl)
    log.seed([_pod(victim.name, "worker", i, f"u{i}") for i in range(n)])
    log.feed("MODIFIED", _pod(victim.name, "worker", 0, "u0", evicted=True))  # condition written
    log.feed("DELETED", _pod(victim.name, "worker", 0, "u0", evicted=True))  # then deleted: same pod, once
    log.feed("ADDED", _pod(victim.name, "worker", 0, "r0", node=None, phase="Pending"))  # the controller's replacement
    log.feed("DELETED", _pod(victim.name, "worker", 1, "u1"))  # deleted by someone else: not an eviction
    r = log.result()
    assert r["evicted"] == {victim.key: 1}
    assert r["evicted_tasks"] == {victim.key: {"worker": 1}}
    assert r["lowest_live"] == {victim.key: n - 2}
    assert r["broken"] == [victim.key]  # rigid: below minAvailable after the eviction


def test_a_safe_eviction_does_not_break_and_other_disruption_reasons_are_not_evictions():
    wl = generate(_seed_where(lambda w: w.gangs[0].replicas - w.gangs[0].min_member >= 1))
    victim = wl.gangs[0]
    task = victim.tasks[-1].name
    log = EvictionLog(wl)
    log.seed([_pod(victim.name, task, i, f"u{i}") for i in range(victim.replicas)])
    log.feed("DELETED", _pod(victim.name, task, 0, "u0", evicted=True))
    log.feed("DELETED", _pod(victim.name, task, 1, "u1", evicted=True, reason="TerminationByKubelet"))
    r = log.result()
    assert r["evicted"] == {victim.key: 1}
    assert r["lowest_live"][victim.key] == victim.replicas - 2
    assert (victim.replicas - 2 < victim.min_member) == (r["broken"] == [victim.key])


def _outcome(bound_pre, evicted, broken, tasks=None):
    wl_gangs = {
        "job/v": {"bound": 4 - evicted.get("job/v", 0), "pods": 4, "min_member": 3, "podgroup_phase": "Running",
                  "job_phase": None},
        "job/hi": {"bound": bound_pre, "pods": 2, "min_member": 2, "podgroup_phase": None, "job_phase": None},
    }
    return {"gangs": wl_gangs, "queues": {}, "evicted": evicted, "evicted_tasks": tasks or {}, "broken": broken}


def test_compare_reports_bound_gangs_evictions_per_job_and_broken_gangs():
    wl = generate(1)
    a = _outcome(2, {"job/v": 2}, ["job/v"])
    b = _outcome(0, {}, [])
    got = [(d.subject, d.what, d.volcano, d.volcano_py) for d in compare(1, wl, a, b)]
    assert got == [
        ("job/hi", "ready", True, False),
        ("job/hi", "bound", 2, 0),
        ("job/v", "ready", False, True),  # 2 of minimum 3 left on Volcano's side
        ("job/v", "bound", 2, 4),
        ("job/v", "evicted", 2, 0),
        ("job/v", "broken", True, False),
    ]
    assert compare(1, wl, a, a) == []


def test_compare_looks_at_tasks_only_where_the_role_rule_fixes_the_split():
    wl = generate(_seed_where(lambda w: w.task_split_fixed()))
    (key,) = sorted(wl.task_split_fixed())[:1]
    a = {"gangs": {}, "evicted": {key: 2}, "evicted_tasks": {key: {"worker": 2}}, "broken": []}
    b = {"gangs": {}, "evicted": {key: 2}, "evicted_tasks": {key: {"ps": 1, "worker": 1}}, "broken": []}
    got = [(d.subject, d.what) for d in compare(wl.seed, wl, a, b)]
    assert got == [(key, "evicted per task")]
    other = {"gangs": {}, "evicted": {"job/elsewhere": 2}, "evicted_tasks": {"job/elsewhere": {"a": 2}}}
    assert compare(wl.seed, wl, other, {**other, "evicted_tasks": {"job/elsewhere": {"b": 2}}}) == []


def test_coverage_counts_come_from_volcanos_outcome():
    topo = generate(_seed_where(lambda w: w.eligible_domains() > MAX_DOMAINS))
    roles = generate(_seed_where(lambda w: w.task_split_fixed() and w.design.scenario != "topology"))
    role_key = sorted(roles.task_split_fixed())[0]
    victim = topo.gangs[0].key
    assert coverage_of(topo, {"evicted": {victim: 2}, "broken": [victim]}) == {
        "evicted": True, "whole_bundle": True, "role_minimums": False, "topology_over_max_domains": True}
    assert coverage_of(topo, {"evicted": {}, "broken": []}) == dict.fromkeys(TARGETS, False)
    assert coverage_of(roles, {"evicted": {role_key: 1}, "broken": []}) == {
        "evicted": True, "whole_bundle": False, "role_minimums": True, "topology_over_max_domains": False}
    assert coverage([(topo, {"evicted": {victim: 1}, "broken": []}), (roles, {"evicted": {role_key: 1}})]) == {
        "evicted": 2, "whole_bundle": 0, "role_minimums": 1, "topology_over_max_domains": 1}


def test_the_family_counts_only_with_200_workloads_and_every_target_reached():
    full = dict(TARGETS)
    assert verdict(full, 200) == (True, [])
    ok, short = verdict({**full, "whole_bundle": 39}, 200)
    assert not ok and short == ["whole_bundle 39 < 40"]
    ok, short = verdict(full, 150)
    assert not ok and short[0] == "150 workloads < 200"


def _record(seed, o, seconds=5.0):
    return {"seed": seed, "seconds": seconds, "settled": True, "outcome": o}


def test_report_prints_coverage_time_and_differences_and_rewrites_only_its_own_section(tmp_path):
    wl = generate(3)
    victim = wl.gangs[0]
    gangs = {g.key: {"bound": g.replicas, "pods": g.replicas, "min_member": g.min_member, "podgroup_phase": "Running",
                     "job_phase": "Running"} for g in wl.gangs}
    evicting = {"gangs": gangs, "queues": {}, "evicted": {victim.key: 2}, "evicted_tasks": {}, "broken": [victim.key]}
    idle = {**evicting, "evicted": {}, "broken": []}
    for side, o in (("volcano", evicting), ("volcano-py", idle)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "3.json").write_text(json.dumps(_record(3, o)))
        (tmp_path / side / "4.json").write_text(json.dumps(_record(4, idle)))
        for seed in (3, 4):  # a run made in two chunks: the time is their sum
            (tmp_path / side / f"_side-{seed}-{seed}.json").write_text(json.dumps({"seconds": 300.0, "workloads": 1}))
    # Volcano's side alone ran seed 5: it counts for coverage, not for agreement
    v5 = generate(5).gangs[0].key
    (tmp_path / "volcano" / "5.json").write_text(json.dumps(_record(5, {**idle, "evicted": {v5: 1}})))
    text, md = preemption_report.build(tmp_path, [3, 4, 5], command="make differential FAMILY=preemption")
    assert "workloads compared: 2; in full agreement: **1** (50.0%)" in md
    assert "not run on both sides: 1 (5)" in md
    assert "over the 3 workloads it ran" in md and "Volcano evicted: 2 (target 120, scaled 2)" in md
    assert "a whole bundle (a victim gang broken): 1 (target 40" in md
    assert "**does not count** (2 workloads < 200" in md
    assert "run 10.0 min for 2 workloads in 2 chunks" in md
    assert f"{victim.key} evicted: Volcano 2, volcano-py 0" in md and f"{victim.key} broken: Volcano True" in md
    assert "### seed 3" in text and wl.describe()[0] in text and "gangpreempt" in text

    doc = tmp_path / "CONFORMANCE.md"
    doc.write_text(f"intro\n{report.BEGIN}\nrandom family\n{report.END}\n")
    preemption_report.rewrite_section(doc, "first")
    preemption_report.rewrite_section(doc, md)
    body = doc.read_text()
    assert body.startswith(f"intro\n{report.BEGIN}\nrandom family\n{report.END}\n")
    assert body.count(preemption_report.BEGIN) == 1 and "first" not in body and md in body
