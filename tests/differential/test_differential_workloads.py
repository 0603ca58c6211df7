"""The differential oracle's generator: deterministic from a seed, and every workload one Volcano would admit."""

from differential.workloads import (
    GPU,
    GROUP_ANNOTATION,
    MAX_PODS,
    NAMESPACE,
    SCHEDULER_NAME,
    TAINT_KEY,
    generate,
)

SEEDS = range(1, 301)


def test_same_seed_same_workload_and_different_seeds_differ():
    a, b = generate(42), generate(42)
    assert a.describe() == b.describe()
    assert [g.manifests for g in a.gangs] == [g.manifests for g in b.gangs]
    assert a.nodes == b.nodes and a.queues == b.queues and a.priority_classes == b.priority_classes
    assert len({tuple(generate(s).describe()) for s in range(1, 51)}) == 50


def test_sizes_stay_in_the_brief():
    for s in SEEDS:
        w = generate(s)
        assert 2 <= len(w.nodes) <= 6
        assert 1 <= len(w.queues) <= 3
        assert 2 <= len(w.priority_classes) <= 3
        assert 1 <= len(w.gangs) <= 5
        assert sum(g.replicas for g in w.gangs) <= MAX_PODS
        for g in w.gangs:
            assert all(1 <= t.replicas <= 6 for t in g.tasks)
            assert g.kind != "job" or 1 <= len(g.tasks) <= 3


def test_jobs_pass_volcanos_validation_and_min_is_the_webhook_default():
    """admit_job.go: task minAvailable <= replicas, job minAvailable <= the sum of replicas, queue set; an unset job
    minAvailable is what mutate_job.go's patchDefaultMinAvailable makes of it."""
    jobs = 0
    for s in SEEDS:
        w = generate(s)
        for g in w.gangs:
            if g.kind != "job":
                continue
            jobs += 1
            (job,) = g.manifests
            spec = job["spec"]
            assert job["metadata"]["namespace"] == NAMESPACE
            assert spec["queue"] in w.queue_names and spec["schedulerName"] == SCHEDULER_NAME
            total = sum(t["replicas"] for t in spec["tasks"])
            for t in spec["tasks"]:
                assert t.get("minAvailable", t["replicas"]) <= t["replicas"]
                assert t["template"]["spec"]["schedulerName"] == SCHEDULER_NAME
            if "minAvailable" in spec:
                assert 1 <= spec["minAvailable"] <= total
                assert g.min_member == spec["minAvailable"]
            else:
                assert g.min_member == sum(t.get("minAvailable", t["replicas"]) for t in spec["tasks"])
    assert jobs > 300


def test_bare_podgroups_have_their_pods_annotated_and_a_reachable_min_member():
    groups = 0
    for s in SEEDS:
        for g in generate(s).gangs:
            if g.kind != "podgroup":
                continue
            groups += 1
            pg, *pods = g.manifests
            assert pg["kind"] == "PodGroup" and pg["metadata"]["name"] == g.name
            assert 1 <= pg["spec"]["minMember"] <= len(pods) == g.replicas
            assert g.min_member == pg["spec"]["minMember"]
            for p in pods:
                assert p["kind"] == "Pod"
                assert p["metadata"]["annotations"][GROUP_ANNOTATION] == g.name
                assert p["spec"]["schedulerName"] == SCHEDULER_NAME
                assert p["spec"].get("priorityClassName") == pg["spec"].get("priorityClassName")
    assert groups > 50


def test_the_dimensions_the_brief_asks_for_all_occur():
    seen = set()
    for s in SEEDS:
        w = generate(s)
        if any(GPU in n["status"]["capacity"] for n in w.nodes):
            seen.add("gpu nodes")
        if any(n["spec"]["taints"] for n in w.nodes):
            seen.add("taints")
        if any("capability" in q["spec"] for q in w.queues):
            seen.add("capability")
        if any(not q["spec"]["reclaimable"] for q in w.queues):
            seen.add("not reclaimable")
        if len(w.waves()) > 1:
            seen.add("late gang")
        for g in w.gangs:
            seen.add(g.kind)
            if any(t.requests.best_effort for t in g.tasks):
                seen.add("best effort")
            if any(t.min_available is not None for t in g.tasks):
                seen.add("task minAvailable")
            if any(t.requests.gpu for t in g.tasks):
                seen.add("gpu requests")
            for m in g.manifests:
                spec = m["spec"]["tasks"][0]["template"]["spec"] if m["kind"] == "Job" else m["spec"]
                if spec.get("nodeSelector"):
                    seen.add("nodeSelector")
                if any(t["key"] == TAINT_KEY for t in spec.get("tolerations", [])):
                    seen.add("tolerations")
                meta = m["spec"]["tasks"][0]["template"]["metadata"] if m["kind"] == "Job" else m["metadata"]
                if "volcano.sh/preemptable" in (meta.get("annotations") or {}):
                    seen.add("preemptable")
    assert seen == {
        "gpu nodes", "taints", "capability", "not reclaimable", "late gang", "job", "podgroup", "best effort",
        "task minAvailable", "gpu requests", "nodeSelector", "tolerations", "preemptable",
    }


def test_names_carry_the_seed_and_only_the_last_gang_is_late():
    for s in SEEDS:
        w = generate(s)
        names = [n["metadata"]["name"] for n in w.nodes] + w.queue_names + [g.name for g in w.gangs]
        names += [p["metadata"]["name"] for p in w.priority_classes]
        assert all(n.startswith(f"w{s}-") for n in names)
        assert len(set(names)) == len(names)
        waves = w.waves()
        assert len(waves) <= 2 and (len(waves) == 1 or len(waves[1]) == 1 and waves[1][0] is w.gangs[-1])


def test_gpu_requests_are_limits_too_and_only_on_gpu_clusters():
    for s in SEEDS:
        w = generate(s)
        gpu_cluster = any(GPU in n["status"]["capacity"] for n in w.nodes)
        for g in w.gangs:
            for t in g.tasks:
                res = t.requests.resources()
                if t.requests.gpu:
                    assert gpu_cluster
                    assert res["limits"][GPU] == res["requests"][GPU] == str(t.requests.gpu)
                if t.requests.best_effort:
                    assert res == {}
