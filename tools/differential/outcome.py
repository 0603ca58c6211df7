"""What a settled workload came to, and where the two sides disagree. Pure: works on the raw JSON of pods, PodGroups
and Jobs as listed from the apiserver, and on the Workload that generated them.

Per gang: how many of its pods are bound (spec.nodeName set, not Succeeded/Failed, not being deleted) and whether
that reaches its minimum (job minAvailable as defaulted by Volcano's webhook, or PodGroup minMember). Per queue: the
summed requests of those bound pods, by resource. Nodes are deliberately not compared: which node a pod lands on is
placement, where the two schedulers may legitimately differ.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

from kubernetes.utils.quantity import parse_quantity

from .workloads import GROUP_ANNOTATION, Workload

JOB_NAME_LABEL = "volcano.sh/job-name"
TOLERANCE = 1e-6


def pod_requests(pod: dict) -> dict[str, float]:
    """Effective requests: max(sum of containers, each init container), plus overhead; requests default to limits."""

    def of(c: dict) -> dict:
        res = c.get("resources") or {}
        return {**(res.get("limits") or {}), **(res.get("requests") or {})}

    spec = pod.get("spec") or {}
    total: dict[str, float] = defaultdict(float)
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] += float(parse_quantity(str(v)))
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total[k], float(parse_quantity(str(v))))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += float(parse_quantity(str(v)))
    return {k: v for k, v in total.items() if v}


def is_bound(pod: dict) -> bool:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    return bool(spec.get("nodeName")) and status.get("phase") not in ("Succeeded", "Failed") and not meta.get(
        "deletionTimestamp"
    )


def gang_of_pod(pod: dict, workload: Workload) -> str | None:
    meta = pod.get("metadata") or {}
    job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
    if job:
        return f"job/{job}"
    group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
    if group and any(g.kind == "podgroup" and g.name == group for g in workload.gangs):
        return f"podgroup/{group}"
    return None


def _podgroup_of(gang_kind: str, gang_name: str, podgroups: list[dict]) -> dict | None:
    for pg in podgroups:
        meta = pg.get("metadata") or {}
        if gang_kind == "podgroup" and meta.get("name") == gang_name:
            return pg
        if gang_kind == "job" and any(
            o.get("kind") == "Job" and o.get("name") == gang_name for o in meta.get("ownerReferences") or []
        ):
            return pg
    return None


@dataclass(frozen=True, slots=True)
class GangOutcome:
    bound: int
    pods: int
    min_member: int
    podgroup_phase: str | None
    job_phase: str | None

    @property
    def ready(self) -> bool:
        return self.bound >= self.min_member


def outcome(workload: Workload, pods: list[dict], podgroups: list[dict], jobs: list[dict]) -> dict:
    """{"gangs": {key: GangOutcome as dict}, "queues": {queue: {resource: amount}}} for one side."""
    gang_by_key = {g.key: g for g in workload.gangs}
    bound: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    queues: dict[str, dict[str, float]] = {q: {} for q in workload.queue_names}
    for pod in pods:
        key = gang_of_pod(pod, workload)
        if key not in gang_by_key:
            continue
        count[key] += 1
        if not is_bound(pod):
            continue
        bound[key] += 1
        alloc = queues.setdefault(gang_by_key[key].queue, {})
        for res, amount in pod_requests(pod).items():
            alloc[res] = alloc.get(res, 0.0) + amount
    job_phase = {
        (j.get("metadata") or {}).get("name"): ((j.get("status") or {}).get("state") or {}).get("phase")
        for j in jobs
    }
    gangs = {}
    for g in workload.gangs:
        pg = _podgroup_of(g.kind, g.name, podgroups)
        gangs[g.key] = asdict(
            GangOutcome(
                bound=bound[g.key],
                pods=count[g.key],
                min_member=g.min_member,
                podgroup_phase=((pg or {}).get("status") or {}).get("phase"),
                job_phase=job_phase.get(g.name) if g.kind == "job" else None,
            )
        )
    return {"gangs": gangs, "queues": queues}


@dataclass(frozen=True, slots=True)
class Difference:
    seed: int
    subject: str  # "job/<name>", "podgroup/<name>" or "queue/<name>"
    what: str  # "ready", "bound", or a resource name
    volcano: object
    volcano_py: object

    def line(self) -> str:
        return f"seed {self.seed}: {self.subject} {self.what}: volcano={self.volcano} volcano-py={self.volcano_py}"


def compare(seed: int, volcano: dict, volcano_py: dict) -> list[Difference]:
    """Per gang: ready (bound >= minimum) and the bound count; per queue: each resource of the allocated sum."""
    diffs: list[Difference] = []
    vg, pg = volcano.get("gangs", {}), volcano_py.get("gangs", {})
    for key in sorted(set(vg) | set(pg)):
        a, b = vg.get(key), pg.get(key)
        if a is None or b is None:
            diffs.append(Difference(seed, key, "present", a is not None, b is not None))
            continue
        ready_a, ready_b = a["bound"] >= a["min_member"], b["bound"] >= b["min_member"]
        if ready_a != ready_b:
            diffs.append(Difference(seed, key, "ready", ready_a, ready_b))
        if a["bound"] != b["bound"]:
            diffs.append(Difference(seed, key, "bound", a["bound"], b["bound"]))
    vq, pq = volcano.get("queues", {}), volcano_py.get("queues", {})
    for q in sorted(set(vq) | set(pq)):
        a, b = vq.get(q, {}), pq.get(q, {})
        for res in sorted(set(a) | set(b)):
            x, y = a.get(res, 0.0), b.get(res, 0.0)
            if abs(x - y) > TOLERANCE * max(1.0, abs(x), abs(y)):
                diffs.append(Difference(seed, f"queue/{q}", res, _fmt(res, x), _fmt(res, y)))
    return diffs


def _fmt(res: str, v: float) -> str:
    if res == "memory":
        return f"{v / 2**20:g}Mi"
    if res == "cpu":
        return f"{v * 1000:g}m"
    return f"{v:g}"


@dataclass(slots=True)
class Tally:
    workloads: int = 0
    workloads_agree: int = 0
    gangs: int = 0
    gangs_ready_agree: int = 0
    gangs_bound_agree: int = 0
    queues: int = 0
    queues_agree: int = 0
    unsettled: int = 0  # workloads where a side hit the settle deadline


def tally(pairs: list[tuple[dict, dict]]) -> tuple[Tally, list[Difference]]:
    """pairs: (volcano record, volcano-py record) per workload, records as run.py writes them."""
    t = Tally()
    all_diffs: list[Difference] = []
    for a, b in pairs:
        seed = a["seed"]
        diffs = compare(seed, a["outcome"], b["outcome"])
        all_diffs += diffs
        t.workloads += 1
        t.workloads_agree += not diffs
        t.unsettled += not (a.get("settled", True) and b.get("settled", True))
        gang_keys = set(a["outcome"]["gangs"]) | set(b["outcome"]["gangs"])
        t.gangs += len(gang_keys)
        t.gangs_ready_agree += len(gang_keys - {d.subject for d in diffs if d.what in ("ready", "present")})
        t.gangs_bound_agree += len(gang_keys - {d.subject for d in diffs if d.what in ("bound", "present")})
        queue_keys = set(a["outcome"]["queues"]) | set(b["outcome"]["queues"])
        t.queues += len(queue_keys)
        differing = {d.subject.split("/", 1)[1] for d in diffs if d.subject.startswith("queue/")}
        t.queues_agree += len(queue_keys - differing)
    return t, all_diffs
