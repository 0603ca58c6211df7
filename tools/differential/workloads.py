"""Seeded random workloads for the differential oracle: pure, deterministic from one integer seed.

A workload is a small cluster (2-6 kwok nodes, cpu/memory and sometimes ``nvidia.com/gpu``, labels, taints), 1-3
queues (weights, sometimes a capability, sometimes not reclaimable), 2-3 PriorityClasses, and 1-5 gangs: Volcano
Jobs (1-3 tasks) or bare PodGroups with pods annotated ``scheduling.k8s.io/group-name``. Every pod asks for
``schedulerName: volcano``. Gangs of wave 0 are submitted together; a workload sometimes has one gang of wave 1,
submitted after wave 0 settled (the late arrival that makes preempt and reclaim act).

Every name carries the seed (``w<seed>-...``) so objects of consecutive workloads never collide in a cache.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SCHEDULER_NAME = "volcano"
NAMESPACE = "differential"
GPU = "nvidia.com/gpu"
LABEL_PREFIX = "differential.volcano-py.io"
ZONE_LABEL, DISK_LABEL, TAINT_KEY = f"{LABEL_PREFIX}/zone", f"{LABEL_PREFIX}/disk", f"{LABEL_PREFIX}/dedicated"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
MAX_PODS = 24  # per workload, so one settles in seconds

CPU_CHOICES_M = (250, 500, 1000, 2000)
MEM_CHOICES_MI = (256, 512, 1024, 2048)


@dataclass(frozen=True, slots=True)
class Requests:
    """Per-pod requests: cpu in millicores, memory in MiB, gpus. All zero = BestEffort (no resources block)."""

    cpu_m: int = 0
    mem_mi: int = 0
    gpu: int = 0

    @property
    def best_effort(self) -> bool:
        return not (self.cpu_m or self.mem_mi or self.gpu)

    def resources(self) -> dict:
        if self.best_effort:
            return {}
        req = {"cpu": f"{self.cpu_m}m", "memory": f"{self.mem_mi}Mi"}
        if self.gpu:
            req[GPU] = str(self.gpu)
        # Extended resources cannot be overcommitted: requests == limits for the GPU.
        return {"requests": req, **({"limits": {GPU: str(self.gpu)}} if self.gpu else {})}

    def as_dict(self) -> dict[str, float]:
        """The same units outcome.py sums in: cpu in cores, memory in bytes, gpus."""
        out: dict[str, float] = {}
        if self.cpu_m:
            out["cpu"] = self.cpu_m / 1000
        if self.mem_mi:
            out["memory"] = float(self.mem_mi * 1024 * 1024)
        if self.gpu:
            out[GPU] = float(self.gpu)
        return out

    def describe(self) -> str:
        if self.best_effort:
            return "BestEffort"
        s = f"{self.cpu_m}m/{self.mem_mi}Mi"
        return s + (f"/{self.gpu}gpu" if self.gpu else "")


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    replicas: int
    min_available: int | None  # None: not set (Volcano's webhook defaults it to replicas)
    requests: Requests


@dataclass(slots=True)
class Gang:
    """One Volcano Job or one bare PodGroup, as the comparison sees it."""

    kind: str  # "job" | "podgroup"
    name: str
    queue: str
    wave: int
    priority_class: str | None
    min_member: int  # what the gang needs: job minAvailable (defaulted as the webhook does) or PodGroup minMember
    tasks: list[Task]
    manifests: list[dict] = field(default_factory=list)  # created in this order
    notes: list[str] = field(default_factory=list)  # nodeSelector, tolerations, annotations: for the report

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    def describe(self) -> str:
        tasks = ", ".join(
            f"{t.name} x{t.replicas}{'' if t.min_available is None else f' min {t.min_available}'} "
            f"{t.requests.describe()}"
            for t in self.tasks
        )
        extra = "; ".join(self.notes)
        return (
            f"{self.key} queue={self.queue} min={self.min_member}/{self.replicas} "
            f"pc={self.priority_class or '-'} wave={self.wave} [{tasks}]" + (f" ({extra})" if extra else "")
        )


@dataclass(slots=True)
class Workload:
    seed: int
    nodes: list[dict]
    queues: list[dict]
    priority_classes: list[dict]
    gangs: list[Gang]

    @property
    def queue_names(self) -> list[str]:
        return [q["metadata"]["name"] for q in self.queues]

    def waves(self) -> list[list[Gang]]:
        top = max((g.wave for g in self.gangs), default=0)
        return [[g for g in self.gangs if g.wave == w] for w in range(top + 1)]

    def describe(self) -> list[str]:
        lines = []
        for n in self.nodes:
            cap = n["status"]["capacity"]
            labels = {k.rsplit("/", 1)[1]: v for k, v in n["metadata"]["labels"].items() if k.startswith(LABEL_PREFIX)}
            taints = [f"{t['key'].rsplit('/', 1)[1]}={t['value']}:{t['effect']}" for t in n["spec"].get("taints", [])]
            lines.append(
                f"node {n['metadata']['name']}: cpu={cap['cpu']} mem={cap['memory']}"
                + (f" gpu={cap[GPU]}" if GPU in cap else "")
                + (f" labels={labels}" if labels else "")
                + (f" taints={taints}" if taints else "")
            )
        for q in self.queues:
            spec = q["spec"]
            lines.append(
                f"queue {q['metadata']['name']}: weight={spec['weight']}"
                + (f" capability={spec['capability']}" if "capability" in spec else "")
                + ("" if spec.get("reclaimable", True) else " reclaimable=false")
            )
        lines.append(
            "priorityclasses: "
            + ", ".join(f"{p['metadata']['name']}={p['value']}" for p in self.priority_classes)
        )
        lines += [g.describe() for g in self.gangs]
        return lines


def _node(name: str, cpu: int, mem_gi: int, gpus: int, labels: dict, taints: list) -> dict:
    resources = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110"}
    if gpus:
        resources[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **labels,
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": taints},
        "status": {"capacity": resources, "allocatable": dict(resources)},
    }


def _container(req: Requests) -> dict:
    c: dict = {"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}
    res = req.resources()
    if res:
        c["resources"] = res
    return c


def _placement(rng: random.Random, nodes: list[dict]) -> tuple[dict, list, list[str]]:
    """A nodeSelector (sometimes one no node satisfies) and tolerations (sometimes of a taint some node has)."""
    selector: dict = {}
    tolerations: list = []
    notes: list[str] = []
    if rng.random() < 0.2:
        key, value = rng.choice([(ZONE_LABEL, "a"), (ZONE_LABEL, "b"), (DISK_LABEL, "ssd")])
        selector = {key: value}
        notes.append(f"nodeSelector {key.rsplit('/', 1)[1]}={value}")
    if rng.random() < 0.25:
        if rng.random() < 0.5:
            tolerations = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
            notes.append("tolerates dedicated:*")
        else:
            value = rng.choice(["batch", "infer"])
            tolerations = [{"key": TAINT_KEY, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
            notes.append(f"tolerates dedicated={value}")
    return selector, tolerations, notes


def _requests(rng: random.Random, gpu_cluster: bool, best_effort_p: float = 0.12) -> Requests:
    if rng.random() < best_effort_p:
        return Requests()
    gpu = rng.choice([1, 1, 2]) if gpu_cluster and rng.random() < 0.3 else 0
    return Requests(rng.choice(CPU_CHOICES_M), rng.choice(MEM_CHOICES_MI), gpu)


def _pod_spec(req: Requests, selector: dict, tolerations: list, priority_class: str | None) -> dict:
    spec: dict = {"schedulerName": SCHEDULER_NAME, "containers": [_container(req)], "terminationGracePeriodSeconds": 0}
    if selector:
        spec["nodeSelector"] = dict(selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def generate(seed: int) -> Workload:
    rng = random.Random(seed)
    p = f"w{seed}"

    gpu_cluster = rng.random() < 0.3
    nodes = []
    for i in range(rng.randint(2, 6)):
        labels = {ZONE_LABEL: rng.choice(["a", "b"])}
        if rng.random() < 0.5:
            labels[DISK_LABEL] = "ssd"
        taints = []
        if rng.random() < 0.2:
            taints = [{"key": TAINT_KEY, "value": rng.choice(["batch", "infer"]), "effect": "NoSchedule"}]
        gpus = rng.choice([1, 2, 4]) if gpu_cluster and rng.random() < 0.6 else 0
        nodes.append(_node(f"{p}-n{i}", rng.choice([2, 4, 8]), rng.choice([4, 8, 16]), gpus, labels, taints))
    if gpu_cluster and not any(GPU in n["status"]["capacity"] for n in nodes):
        for r in (nodes[0]["status"]["capacity"], nodes[0]["status"]["allocatable"]):
            r[GPU] = "2"
    total_cpu = sum(int(n["status"]["capacity"]["cpu"]) for n in nodes)

    values = sorted(rng.sample([10, 100, 1000, 10000], rng.randint(2, 3)))
    pcs = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"{p}-p{i}"},
            "value": v,
            "globalDefault": False,
        }
        for i, v in enumerate(values)
    ]
    pc_names = [pc["metadata"]["name"] for pc in pcs]

    queues = []
    for i in range(rng.randint(1, 3)):
        spec: dict = {"weight": rng.randint(1, 4), "reclaimable": rng.random() >= 0.15}
        if rng.random() < 0.3:
            cpu = max(1, round(total_cpu * rng.choice([0.25, 0.4, 0.6])))
            spec["capability"] = {"cpu": str(cpu)}
            if rng.random() < 0.5:
                spec["capability"]["memory"] = f"{rng.choice([4, 8, 16])}Gi"
        queues.append(
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": f"{p}-q{i}"},
             "spec": spec}
        )
    queue_names = [q["metadata"]["name"] for q in queues]

    gangs: list[Gang] = []
    budget = MAX_PODS
    n_gangs = rng.randint(1, 5)
    late = n_gangs > 1 and rng.random() < 0.35  # the last gang arrives after the others settled
    for gi in range(n_gangs):
        if budget <= 0:
            break
        wave = 1 if late and gi == n_gangs - 1 else 0
        queue = rng.choice(queue_names)
        pc = rng.choice([*pc_names, None])
        if wave == 1 and pc_names and rng.random() < 0.6:
            pc = pc_names[-1]  # late and important: preempt or reclaim should act
        preemptable = rng.choice([None, None, "true", "false"])
        selector, tolerations, notes = _placement(rng, nodes)
        if preemptable:
            notes.append(f"preemptable={preemptable}")
        if rng.random() < 0.7:
            gangs.append(_job(rng, f"{p}-j{gi}", queue, wave, pc, preemptable, selector, tolerations, notes,
                              gpu_cluster, budget))
        else:
            gangs.append(_podgroup(rng, f"{p}-g{gi}", queue, wave, pc, preemptable, selector, tolerations, notes,
                                   gpu_cluster, budget))
        budget -= gangs[-1].replicas
    return Workload(seed, nodes, queues, pcs, gangs)


def _job(rng, name, queue, wave, pc, preemptable, selector, tolerations, notes, gpu_cluster, budget) -> Gang:
    tasks: list[Task] = []
    for ti in range(rng.randint(1, 3)):
        left = budget - sum(t.replicas for t in tasks)
        if left <= 0:
            break
        replicas = rng.randint(1, min(6, left))
        task_min = rng.randint(1, replicas) if rng.random() < 0.4 else None
        tasks.append(Task(f"t{ti}", replicas, task_min, _requests(rng, gpu_cluster)))
    total = sum(t.replicas for t in tasks)
    job_min = rng.randint(1, total) if rng.random() < 0.5 else None
    # Volcano's mutating webhook: an unset (0) job minAvailable is the sum of the task minimums, each defaulting to
    # the task's replicas.
    effective_min = job_min if job_min is not None else sum(
        t.replicas if t.min_available is None else t.min_available for t in tasks
    )
    pod_pc = pc if pc and rng.random() < 0.7 else None
    if pc and not pod_pc:
        notes.append("priorityClassName on the job only")
    template_meta: dict = {}
    if preemptable:
        template_meta["annotations"] = {PREEMPTABLE_ANNOTATION: preemptable}
    spec: dict = {
        "schedulerName": SCHEDULER_NAME,
        "queue": queue,
        "tasks": [
            {
                "name": t.name,
                "replicas": t.replicas,
                **({"minAvailable": t.min_available} if t.min_available is not None else {}),
                "template": {
                    "metadata": {k: dict(v) for k, v in template_meta.items()},
                    "spec": {**_pod_spec(t.requests, selector, tolerations, pod_pc), "restartPolicy": "Always"},
                },
            }
            for t in tasks
        ],
    }
    if job_min is not None:
        spec["minAvailable"] = job_min
    if pc:
        spec["priorityClassName"] = pc
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    return Gang("job", name, queue, wave, pc, effective_min, tasks, [manifest], notes)


def _podgroup(rng, name, queue, wave, pc, preemptable, selector, tolerations, notes, gpu_cluster, budget) -> Gang:
    n = rng.randint(1, min(6, budget))
    min_member = rng.randint(1, n)
    req = _requests(rng, gpu_cluster, best_effort_p=0.1)
    spec: dict = {"minMember": min_member, "queue": queue}
    if pc:
        spec["priorityClassName"] = pc
    if rng.random() < 0.5 and not req.best_effort:
        mr = {k: v * min_member for k, v in (("cpu", req.cpu_m), ("memory", req.mem_mi), ("gpu", req.gpu))}
        spec["minResources"] = {"cpu": f"{mr['cpu']}m", "memory": f"{mr['memory']}Mi"}
        if mr["gpu"]:
            spec["minResources"][GPU] = str(mr["gpu"])
        notes.append("minResources")
    manifests: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
    ]
    annotations = {GROUP_ANNOTATION: name}
    if preemptable:
        annotations[PREEMPTABLE_ANNOTATION] = preemptable
    for i in range(n):
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}", "namespace": NAMESPACE, "annotations": dict(annotations)},
                "spec": {**_pod_spec(req, selector, tolerations, pc), "restartPolicy": "Always"},
            }
        )
    return Gang("podgroup", name, queue, wave, pc, min_member, [Task("pods", n, None, req)], manifests, notes)
