"""The differential's gated family (tools/differential/gated.py): deterministic workloads Volcano would admit, whose
pods opt in to queue admission by scheduling gates (some held by a gate of their own), and the gate rules the run
checks on each side's record."""

from differential.gated import MAX_PODS, OWN_GATE, QUEUE_GATE, gate_counts, gate_violations, generate

from scheduler.jobs import pods_for, validate_job

SEEDS = range(1, 201)


def test_same_seed_same_workload() -> None:
    a, b = generate(7), generate(7)
    assert a.describe() == b.describe() and a.opted == b.opted
    assert len({tuple(generate(s).describe()) for s in range(1, 41)}) == 40


def test_jobs_are_valid_pods_opt_in_as_drawn_and_the_budget_holds() -> None:
    opted_in = own = 0
    for seed in SEEDS:
        wl = generate(seed)
        assert sum(g.replicas for g in wl.gangs) <= MAX_PODS
        priorities = [pc["value"] for pc in wl.priority_classes]
        assert len(set(priorities)) == len(priorities)
        for gang in wl.gangs:
            pods = pods_for(gang.manifests[0]) if gang.kind == "job" else gang.manifests[1:]
            if gang.kind == "job":
                assert validate_job(gang.manifests[0]) == [], (seed, gang.name)
            for pod in pods:
                name = pod["metadata"]["name"]
                prefix = max((p for p in wl.opted if name.startswith(p)), key=len)
                want_in, want_own = wl.opted[prefix]
                annotations = pod["metadata"].get("annotations") or {}
                assert (annotations.get(QUEUE_GATE) == "true") is want_in
                assert ([g["name"] for g in pod["spec"].get("schedulingGates") or []] == [OWN_GATE]) is want_own
                opted_in += want_in
                own += want_own
    assert opted_in > 0 and own > 0  # both kinds drawn


def _record(pods: list[tuple[str, str | None, list[str]]]) -> dict:
    return {"observed": {"pods": [[n, node, "Running" if node else "Pending"] for n, node, _ in pods],
                         "gates": {n: gates for n, _, gates in pods if gates}}}


def test_the_gate_rules_name_each_break() -> None:
    wl = generate(3)
    wl.opted = {"w3-j0-t0-": (True, True), "w3-j0-t1-": (False, False), "w3-g1-": (True, False)}
    fine = _record([("w3-j0-t0-0", None, [OWN_GATE, QUEUE_GATE]), ("w3-j0-t1-0", "n1", []),
                    ("w3-g1-0", "n1", []), ("w3-g1-1", None, [QUEUE_GATE]), ("other", "n1", [QUEUE_GATE])])
    assert gate_violations(wl, fine) == []
    assert gate_counts(wl, fine) == {"w3-j0-t0-": (1, 1), "w3-j0-t1-": (0, 0), "w3-g1-": (1, 0)}
    broken = _record([("w3-j0-t0-0", "n1", [OWN_GATE]), ("w3-j0-t1-0", None, [QUEUE_GATE])])
    assert gate_violations(wl, broken) == [
        "w3-j0-t0-0: bound to n1 though held by its own gate",
        "w3-j0-t0-0: the queue-allocation gate went while its own gate remains",
        "w3-j0-t1-0: carries the queue-allocation gate without opting in",
    ]
