"""The differential oracle's observation and comparison, on hand-written API objects (no cluster)."""

import json

from differential import report
from differential.outcome import compare, outcome, pod_requests, tally
from differential.workloads import GROUP_ANNOTATION, Gang, Requests, Task, Workload


def _workload() -> Workload:
    queues = [{"metadata": {"name": q}, "spec": {"weight": 1}} for q in ("qa", "qb")]
    job = Gang("job", "j", "qa", 0, None, 2, [Task("t0", 3, None, Requests(500, 512))])
    pg = Gang("podgroup", "g", "qb", 0, None, 2, [Task("pods", 2, None, Requests(1000, 1024, 1))])
    return Workload(7, [], queues, [], [job, pg])


def _pod(name, *, job=None, group=None, node=None, phase="Pending", deleting=False, cpu="500m", mem="512Mi",
         gpu=None):
    meta = {"name": name, "labels": {}, "annotations": {}}
    if job:
        meta["labels"]["volcano.sh/job-name"] = job
        meta["annotations"][GROUP_ANNOTATION] = f"{job}-uid"
    if group:
        meta["annotations"][GROUP_ANNOTATION] = group
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    res = {"requests": {"cpu": cpu, "memory": mem}}
    if gpu:
        res["requests"]["nvidia.com/gpu"] = gpu
        res["limits"] = {"nvidia.com/gpu": gpu}
    spec = {"containers": [{"name": "c", "resources": res}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


PODGROUPS = [
    {"metadata": {"name": "j-uid", "ownerReferences": [{"kind": "Job", "name": "j"}]}, "status": {"phase": "Running"}},
    {"metadata": {"name": "g"}, "status": {"phase": "Inqueue"}},
]
JOBS = [{"metadata": {"name": "j"}, "status": {"state": {"phase": "Running"}}}]


def test_outcome_counts_only_bound_live_pods_and_sums_their_requests_per_queue():
    pods = [
        _pod("j-t0-0", job="j", node="n1", phase="Running"),
        _pod("j-t0-1", job="j", node="n2", phase="Running"),
        _pod("j-t0-2", job="j"),  # pending
        _pod("j-t0-3", job="j", node="n1", phase="Succeeded"),  # terminated: not allocated
        _pod("g-0", group="g", node="n1", phase="Running", cpu="1", mem="1Gi", gpu="1"),
        _pod("g-1", group="g", node="n2", phase="Running", deleting=True, cpu="1", mem="1Gi", gpu="1"),
        _pod("stranger", group="not-ours", node="n1", phase="Running"),
    ]
    o = outcome(_workload(), pods, PODGROUPS, JOBS)
    assert o["gangs"] == {
        "job/j": {"bound": 2, "pods": 4, "min_member": 2, "podgroup_phase": "Running", "job_phase": "Running"},
        "podgroup/g": {"bound": 1, "pods": 2, "min_member": 2, "podgroup_phase": "Inqueue", "job_phase": None},
    }
    assert o["queues"] == {
        "qa": {"cpu": 1.0, "memory": 2 * 512 * 2**20},
        "qb": {"cpu": 1.0, "memory": float(2**30), "nvidia.com/gpu": 1.0},
    }
    json.dumps(o)  # records are JSON


def test_pod_requests_take_limits_as_requests_and_init_containers_as_a_floor():
    pod = {
        "spec": {
            "containers": [{"resources": {"limits": {"cpu": "1"}}}, {"resources": {"requests": {"cpu": "250m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        }
    }
    assert pod_requests(pod) == {"cpu": 2.0, "memory": float(2**30)}
    assert pod_requests({"spec": {"containers": [{"name": "c"}]}}) == {}


def _gangs(jb, gb):
    return {
        "job/j": {"bound": jb, "pods": 3, "min_member": 2, "podgroup_phase": None, "job_phase": None},
        "podgroup/g": {"bound": gb, "pods": 2, "min_member": 2, "podgroup_phase": None, "job_phase": None},
    }


def test_compare_reports_ready_bound_and_per_resource_queue_differences():
    a = {"gangs": _gangs(3, 0), "queues": {"qa": {"cpu": 1.5}, "qb": {}}}
    b = {"gangs": _gangs(2, 2), "queues": {"qa": {"cpu": 1.0, "memory": 2.0**20}, "qb": {"cpu": 2.0}}}
    diffs = [(d.subject, d.what, d.volcano, d.volcano_py) for d in compare(5, a, b)]
    assert diffs == [
        ("job/j", "bound", 3, 2),  # both ready (>= 2): only the count differs
        ("podgroup/g", "ready", False, True),
        ("podgroup/g", "bound", 0, 2),
        ("queue/qa", "cpu", "1500m", "1000m"),
        ("queue/qa", "memory", "0Mi", "1Mi"),
        ("queue/qb", "cpu", "0m", "2000m"),
    ]
    assert compare(5, a, a) == []
    assert compare(5, {"gangs": {}, "queues": {"qa": {"cpu": 1.0}}},
                   {"gangs": {}, "queues": {"qa": {"cpu": 1.0 + 1e-12}}}) == []


def test_tally_counts_workloads_gangs_and_queues_in_agreement():
    same = {"gangs": _gangs(2, 2), "queues": {"qa": {"cpu": 1.0}, "qb": {"cpu": 2.0}}}
    other = {"gangs": _gangs(2, 0), "queues": {"qa": {"cpu": 1.0}, "qb": {}}}
    pairs = [
        ({"seed": 1, "outcome": same}, {"seed": 1, "outcome": same}),
        ({"seed": 2, "outcome": same}, {"seed": 2, "outcome": other, "settled": False}),
    ]
    t, diffs = tally(pairs)
    assert (t.workloads, t.workloads_agree, t.unsettled) == (2, 1, 1)
    assert (t.gangs, t.gangs_ready_agree, t.gangs_bound_agree) == (4, 3, 3)
    assert (t.queues, t.queues_agree) == (4, 3)
    assert {(d.seed, d.subject, d.what) for d in diffs} == {
        (2, "podgroup/g", "ready"), (2, "podgroup/g", "bound"), (2, "queue/qb", "cpu")}


def test_report_lists_every_difference_with_its_workload_and_rewrites_only_its_section(tmp_path):
    from differential.workloads import generate

    wl = generate(3)
    gangs = {g.key: {"bound": 0, "pods": g.replicas, "min_member": g.min_member, "podgroup_phase": "Pending",
                     "job_phase": None} for g in wl.gangs}
    bound = {k: {**v, "bound": v["min_member"]} for k, v in gangs.items()}
    for side, gs in (("volcano", gangs), ("volcano-py", bound)):
        (tmp_path / side).mkdir()
        for seed, g in ((3, gs), (4, gangs)):
            rec = {"seed": seed, "seconds": 2.0, "settled": True, "outcome": {"gangs": g, "queues": {}}}
            (tmp_path / side / f"{seed}.json").write_text(json.dumps(rec))
    text, md = report.build(tmp_path, [3, 4, 5], command="make differential DIFF_WORKLOADS=3 DIFF_SEED=3")
    assert "in full agreement: **1**" in md and "workloads compared: 2" in md
    assert "not run on both sides: 1 (5)" in md
    for g in wl.gangs:
        assert f"{g.key} ready: Volcano False, volcano-py True" in md
    assert "### seed 3" in text and wl.describe()[0] in text and "RERUN=3" in text

    doc = tmp_path / "CONFORMANCE.md"
    doc.write_text("intro\n<!-- other:begin -->\ntheirs\n<!-- other:end -->\n")
    report.rewrite_section(doc, "first")
    report.rewrite_section(doc, md)
    body = doc.read_text()
    assert body.startswith("intro\n<!-- other:begin -->\ntheirs\n<!-- other:end -->\n")
    assert body.count(report.BEGIN) == 1 and body.count(report.END) == 1 and "first" not in body
    assert md in body


def test_reruns_tell_a_reproduced_difference_from_a_side_that_does_not_repeat_itself(tmp_path):
    a = {"gangs": _gangs(2, 0), "queues": {}}
    b = {"gangs": _gangs(2, 2), "queues": {}}

    def write(d, side, seed, o):
        (d / side).mkdir(parents=True, exist_ok=True)
        (d / side / f"{seed}.json").write_text(json.dumps({"seed": seed, "seconds": 1.0, "outcome": o}))

    write(tmp_path, "volcano", 1, a)
    write(tmp_path, "volcano-py", 1, b)
    write(tmp_path / "confirm-1", "volcano", 1, a)  # the same difference again
    write(tmp_path / "confirm-1", "volcano-py", 1, b)
    write(tmp_path / "confirm-2", "volcano", 1, b)  # Volcano came out the other way: the sides agree this time
    write(tmp_path / "confirm-2", "volcano-py", 1, b)
    _, md = report.build(tmp_path, [1])
    assert "[rerun 2x: reproduced 1/2; Volcano repeated itself 1/2, volcano-py 2/2]" in md


def test_bound_per_task_counts_the_bound_pods_of_each_task_of_a_multi_task_job():
    from differential.workloads import generate

    wl = next(w for w in map(generate, range(1, 300))
              if any(g.kind == "job" and len(g.tasks) >= 2 for g in w.gangs))
    job = next(g for g in wl.gangs if g.kind == "job" and len(g.tasks) >= 2)
    t0, t1 = job.tasks[0].name, job.tasks[1].name
    pods = [[f"{job.name}-{t0}-0", "n1", "Running"], [f"{job.name}-{t0}-1", None, "Pending"],
            [f"{job.name}-{t1}-0", "n2", "Running"], [f"{job.name}-{t1}-1", "n2", "Succeeded"]]
    counts = report.bound_per_task(wl, pods)[job.key].split()
    assert counts[:2] == [f"{t0}:1", f"{t1}:1"]
