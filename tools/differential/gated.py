"""The differential's gated family: Volcano Jobs and bare PodGroups whose pods opt in to queue admission by
scheduling gates (annotation ``scheduling.volcano.sh/queue-allocation-gate: "true"``), some also held by a gate of
their own that nobody removes, in queues with a cpu capability, with ``SchedulingGatesQueueAdmission`` on in both
sides' webhook and scheduler (run.py starts them so for this family), under Volcano's CI conf (proportion: the
queue's capability bounds which gates go). Pure and deterministic from one integer seed, like workloads.py.

Each side's webhook adds the queue-allocation gate to an opted-in pod at creation (after the pod's own gates); its
scheduler removes it from a pod whose only gate it is once the pod fits its queue (webhooks/admission/pods/mutate,
scheduler/gate, actions/allocate). Compared: per gang, the bound pods (the random family's outcome) and, per gang,
how many pods still carry the queue-allocation gate and how many a gate of their own (``gate_counts``); and, per
side, the rules that hold whatever the order (``gate_violations``): a pod held by its own gate is never bound and
keeps the queue gate if it opted in; a pod that did not opt in never carries the queue gate.

How outcomes are kept independent of what Volcano leaves to chance: every pod asks for the same unit (1 cpu,
1 GiB) and every node holds a whole number of units, so which pod of a job loses its gate or which node it takes
does not change what fits; the jobs have distinct priorities, so job order never falls through to creation time.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from .workloads import GROUP_ANNOTATION, NAMESPACE, SCHEDULER_NAME, ZONE_LABEL, Gang, Requests, Task, Workload, _node

QUEUE_GATE = "scheduling.volcano.sh/queue-allocation-gate"  # the annotation and the gate share the name
OWN_GATE = "differential.volcano-py.io/hold"
FEATURE_GATE = "--feature-gates=SchedulingGatesQueueAdmission=true"
UNIT = Requests(1000, 1024, 0)
MAX_PODS = 20


@dataclass
class GatedWorkload(Workload):
    # pod-name prefix (job/task or podgroup) -> (opted in to the queue gate, held by its own gate)
    opted: dict[str, tuple[bool, bool]] = field(default_factory=dict)


def _spec(pc: str, own_gate: bool) -> dict:
    spec: dict = {"schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0, "priorityClassName": pc,
                  "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"],
                                  "resources": UNIT.resources()}]}
    if own_gate:
        spec["schedulingGates"] = [{"name": OWN_GATE}]
    return spec


def _meta(opt_in: bool) -> dict:
    return {"annotations": {QUEUE_GATE: "true"}} if opt_in else {}


def generate(seed: int) -> GatedWorkload:
    rng = random.Random(seed)
    p = f"w{seed}"
    units = rng.choice([2, 4])
    nodes = [_node(f"{p}-n{i}", units, units * 2, 0, {ZONE_LABEL: "a"}, []) for i in range(rng.randint(2, 4))]
    total = units * len(nodes)
    queues = []
    for i in range(rng.randint(1, 2)):
        spec: dict = {"weight": 1, "reclaimable": False}
        if rng.random() < 0.8:
            spec["capability"] = {"cpu": str(max(1, round(total * rng.choice([0.25, 0.5, 0.75]))))}
        queues.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                       "metadata": {"name": f"{p}-q{i}"}, "spec": spec})
    n_gangs = rng.randint(1, 4)
    values = sorted(rng.sample([10, 100, 1000, 10000, 100000], n_gangs), reverse=True)
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{p}-p{i}"},
            "value": v, "globalDefault": False} for i, v in enumerate(values)]
    gangs: list[Gang] = []
    opted: dict[str, tuple[bool, bool]] = {}
    budget = MAX_PODS
    for g in range(n_gangs):
        if budget <= 0:
            break
        queue = rng.choice(queues)["metadata"]["name"]
        pc = pcs[g]["metadata"]["name"]
        if rng.random() < 0.7:
            gang = _job(rng, f"{p}-j{g}", queue, pc, budget, opted)
        else:
            gang = _podgroup(rng, f"{p}-g{g}", queue, pc, budget, opted)
        gangs.append(gang)
        budget -= gang.replicas
    return GatedWorkload(seed, nodes, queues, pcs, gangs, opted=opted)


def _job(rng: random.Random, name: str, queue: str, pc: str, budget: int,
         opted: dict[str, tuple[bool, bool]]) -> Gang:
    tasks, task_specs, notes = [], [], []
    for t in range(rng.randint(1, 2)):
        left = budget - sum(x.replicas for x in tasks)
        if left <= 0:
            break
        replicas = rng.randint(1, min(5, left))
        opt_in, own = rng.random() < 0.8, rng.random() < 0.15
        task_min = rng.randint(1, replicas) if rng.random() < 0.5 else None
        tasks.append(Task(f"t{t}", replicas, task_min, UNIT))
        opted[f"{name}-t{t}-"] = (opt_in, own)
        task_specs.append({"name": f"t{t}", "replicas": replicas,
                           **({"minAvailable": task_min} if task_min is not None else {}),
                           "template": {"metadata": _meta(opt_in),
                                        "spec": {**_spec(pc, own), "restartPolicy": "Always"}}})
        notes.append(f"t{t}: {'opted in' if opt_in else 'not opted in'}{', own gate' if own else ''}")
    effective = sum(x.replicas if x.min_available is None else x.min_available for x in tasks)
    manifest = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"schedulerName": SCHEDULER_NAME, "queue": queue, "priorityClassName": pc,
                         "tasks": task_specs}}
    return Gang("job", name, queue, 0, pc, effective, tasks, [manifest], notes)


def _podgroup(rng: random.Random, name: str, queue: str, pc: str, budget: int,
              opted: dict[str, tuple[bool, bool]]) -> Gang:
    n = rng.randint(1, min(5, budget))
    min_member = rng.randint(1, n)
    opt_in, own = rng.random() < 0.8, rng.random() < 0.15
    opted[f"{name}-"] = (opt_in, own)
    manifests: list[dict] = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                              "metadata": {"name": name, "namespace": NAMESPACE},
                              "spec": {"minMember": min_member, "queue": queue, "priorityClassName": pc}}]
    for i in range(n):
        annotations = {GROUP_ANNOTATION: name, **_meta(opt_in).get("annotations", {})}
        manifests.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"{name}-{i}", "namespace": NAMESPACE, "annotations": annotations},
                          "spec": {**_spec(pc, own), "restartPolicy": "Always"}})
    notes = [f"{'opted in' if opt_in else 'not opted in'}{', own gate' if own else ''}"]
    return Gang("podgroup", name, queue, 0, pc, min_member, [Task("pods", n, None, UNIT)], manifests, notes)


def turn_on_feature_gate(cp, side, sched) -> None:  # noqa: ANN001 - the harness's ControlPlane, Side, Scheduler
    """Both components that act on the queue-allocation gate get ``SchedulingGatesQueueAdmission=true``: the
    side's webhook is started again with it (same command line otherwise), and the scheduler's command line gets
    it and is started again by the runner's Scheduler."""
    import os

    import harness
    from controlplane import _Proc

    name = "vc-webhook-manager" if "vc-webhook-manager" in side.procs else "volcano-py-webhook"
    old = side.procs[name]
    argv = [*old.argv, FEATURE_GATE]
    health = next(a.split("=", 1)[1] for a in argv if a.startswith("--healthz-address="))
    old.stop()
    env = dict(os.environ, KUBE_POD_NAMESPACE=harness.VOLCANO_NS, HELM_RELEASE_NAME=harness.RELEASE)
    side.procs[name] = _Proc(name, argv, cp.logs / f"{name}.gated.log", env=env)
    if name == "vc-webhook-manager":  # Volcano's serves its health over TLS too
        harness.wait_healthy(cp, side, name, f"https://{health}/healthz", cp._insecure_ctx())
    else:
        harness.wait_healthy(cp, side, name, f"http://{health}/healthz")
    sched.argv.append(FEATURE_GATE)
    sched.restart("gated")


# ---- the gate rules, from a side's record ---------------------------------------------------------------------

def _opted_of(wl: GatedWorkload, pod: str) -> tuple[str, bool, bool] | None:
    """(its gang's pod-name prefix, opted in, held by its own gate) of a workload's pod; None for another."""
    best = max((prefix for prefix in wl.opted if pod.startswith(prefix)), key=len, default=None)
    return None if best is None else (best, *wl.opted[best])


def gate_counts(wl: GatedWorkload, record: dict) -> dict[str, tuple[int, int]]:
    """Per pod-name prefix (a job's task, or a bare PodGroup): (pods still carrying the queue-allocation gate,
    pods still carrying their own gate)."""
    out = {prefix: (0, 0) for prefix in wl.opted}
    for pod, gates in (record["observed"].get("gates") or {}).items():
        found = _opted_of(wl, pod)
        if found is None:
            continue
        queue_gated, own_gated = out[found[0]]
        out[found[0]] = (queue_gated + (QUEUE_GATE in gates), own_gated + (OWN_GATE in gates))
    return out


def gate_violations(wl: GatedWorkload, record: dict) -> list[str]:
    """Pods that break a rule whatever the order: [] when the rules hold."""
    gates = record["observed"].get("gates") or {}
    out = []
    for name, node, _phase in record["observed"]["pods"]:
        found = _opted_of(wl, name)
        if found is None:
            continue
        _, opt_in, own = found
        held = gates.get(name) or []
        if own and node:
            out.append(f"{name}: bound to {node} though held by its own gate")
        if own and OWN_GATE not in held:
            out.append(f"{name}: its own gate is gone")
        if own and opt_in and QUEUE_GATE not in held:
            out.append(f"{name}: the queue-allocation gate went while its own gate remains")
        if not opt_in and QUEUE_GATE in held:
            out.append(f"{name}: carries the queue-allocation gate without opting in")
    return out


def build(run_dir: Path, seeds: list[int], command: str) -> str:
    """The family's report: the random family's per-gang agreement, the gate counts compared, the rules per side."""
    from .report import load, summarize

    volcano, ours = load(run_dir, "volcano", seeds), load(run_dir, "volcano-py", seeds)
    t, diffs, missing, errors = summarize(volcano, ours, seeds)
    lines = [f"# Differential, gated family: `{command}`", "",
             f"{len(seeds)} workloads (seeds {seeds[0]}..{seeds[-1]}); missing {missing or '-'}; errors "
             f"{errors or '-'}", "", "```", json.dumps(t, indent=1, sort_keys=True, default=str), "```", ""]
    gate_diffs = 0
    for seed in seeds:
        wl = generate(seed)
        ok_v = seed in volcano and "error" not in volcano[seed]
        ok_o = seed in ours and "error" not in ours[seed]
        v = gate_violations(wl, volcano[seed]) if ok_v else None
        o = gate_violations(wl, ours[seed]) if ok_o else None
        counts = []
        if ok_v and ok_o:
            cv, co = gate_counts(wl, volcano[seed]), gate_counts(wl, ours[seed])
            counts = [f"{k}: Volcano {cv[k]} volcano-py {co[k]} (queue-gated, own-gated)" for k in cv if cv[k] != co[k]]
            gate_diffs += bool(counts)
        seed_diffs = [d for d in diffs if d.seed == seed]
        if v or o or seed_diffs or counts:
            lines.append(f"## seed {seed}")
            lines += [f"    {line}" for line in wl.describe()]
            lines += [f"- differs: {d}" for d in seed_diffs]
            lines += [f"- gates differ: {c}" for c in counts]
            lines += [f"- Volcano breaks: {x}" for x in v or []]
            lines += [f"- volcano-py breaks: {x}" for x in o or []]
            lines.append("")
    lines.insert(3, f"Workloads whose gate counts differ: {gate_diffs}.")
    return "\n".join(lines) + "\n"
