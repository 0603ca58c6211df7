"""The differential's preemption family (issue 32): seeded workloads for Volcano's gang-aware eviction.

Pure and deterministic from one integer seed, like workloads.py. Every workload runs under GANG_EVICTION_CONF
(``actions: "allocate, backfill, gangreclaim, gangpreempt"``, the capacity plugin, gang and drf with
``enablePreemptable: false``) on both sides. Wave 0 fills the nodes with low-priority gangs; wave 1 is one
higher-priority gang that only fits if something is evicted. Three scenarios:

- ``preempt``: victims and preemptor in one queue (gangpreempt); sometimes a bystander queue whose job sits above
  its deserved share (gangreclaim runs first and may take from it instead);
- ``reclaim``: the victim job in queue ``qa`` above its deserved share, the reclaimer in ``qb`` within its share
  (gangreclaim; capacity's evictable rule: guarantee and deserved), sometimes with ``qa`` not reclaimable or the
  reclaimer asking more than its deserved share (nothing may be evicted);
- ``topology``: HyperNodes (tier 1: one domain per group of nodes, tier 2: a spine over them); the preemptor
  has ``networkTopology: {mode: hard, highestTierAllowed: 1}`` and more eligible tier-1 domains than the
  ``maxDomains`` argument the conf gives gangpreempt and gangreclaim (MAX_DOMAINS).

Victim kinds: ``rigid`` (minAvailable = replicas: only a whole bundle), ``elastic`` (spare pods above
minAvailable: a safe bundle first), ``roles`` (two tasks with minAvailable per task, the job's minAvailable at
least their sum so Volcano enforces the role minimums: bundle.go CreateJobBundles, ``enforceRoles``) and
``loose-roles`` (job minAvailable below the sum of the task minimums: Volcano does not enforce them).

How outcomes are kept independent of what Volcano leaves to chance (Go map order, UIDs, creation times):

- every pod of a workload asks for the same unit (cpu, memory in proportion, sometimes one GPU) and every node
  holds a whole number of units, so freed capacity always fits a preemptor pod wherever it is;
- victim jobs of one queue have distinct priorities, so the victim order (bundle.go SortBundlesForPreempt, the
  job order reversed) never falls through to creation time or UID; a reclaim scenario has one victim job per
  victim queue (SortBundlesForReclaim ties safe bundles on ROI and then on job UID);
- a ``roles`` victim has exactly one role with pods above its minimum, and as many as the job can spare, so
  which pods are safe does not depend on the UID order CreateJobBundles walks them in (``task_split_fixed``);
- in a topology workload all tier-1 domains are alike (same node count) and one victim job fills every node
  exactly, so whichever ``maxDomains`` domains Volcano's gradient lists first (network-topology-aware
  hyperNodeGradientFn walks ``Children``, a Go map), the plan evicts the same number of pods of the same job.

``predict`` is the generator's own reading of the design (not Volcano's code): which jobs lose how many pods and
whether a gang breaks, used only to aim the generator at the coverage targets and to test it; the family's
coverage counts come from Volcano's recorded outcome (``coverage``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .workloads import NAMESPACE, SCHEDULER_NAME, ZONE_LABEL, Gang, Requests, Task, Workload, _node, _pod_spec

MAX_DOMAINS = 2  # gangpreempt/gangreclaim `maxDomains` in GANG_EVICTION_CONF (Volcano's default is 8)
TARGETS = {"evicted": 120, "whole_bundle": 40, "role_minimums": 30, "topology_over_max_domains": 30}
TARGET_WORKLOADS = 200
HYPERNODE_API = ("topology.volcano.sh", "v1alpha1", "hypernodes")
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"

# Volcano's gang-eviction conf, as issue 32 names it: the actions of gangpreempt/gangreclaim, the capacity plugin
# (queue deserved/guarantee/capability) instead of proportion, gang and drf with enablePreemptable false, and the
# network-topology-aware plugin for the HyperNode gradients (plugins/network-topology-aware). Volcano's snapshot
# (/work/shared/peers/volcano) carries no conf file naming gangpreempt (its design doc
# docs/design/gang-aware-eviction-design.md is not in the snapshot); the tiers follow
# installer/helm/chart/volcano/config/volcano-scheduler-ci.conf with proportion replaced by capacity, and the
# `configurations` entries are the arguments gangpreempt.go / gangreclaim.go parse (maxDomains, allowWholeBundle).
# It is examples/sim/gang-eviction.conf plus those arguments and network-topology-aware.
GANG_EVICTION_CONF = f"""actions: "allocate, backfill, gangreclaim, gangpreempt"
configurations:
- name: gangpreempt
  arguments:
    maxDomains: {MAX_DOMAINS}
    allowWholeBundle: true
- name: gangreclaim
  arguments:
    maxDomains: {MAX_DOMAINS}
    allowWholeBundle: true
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""

PRIORITIES = {"low1": 10, "low2": 20, "low3": 30, "mid": 25, "high": 1000}


@dataclass(frozen=True, slots=True)
class Unit:
    """The one pod size of a workload: cpu in millicores, memory in MiB (in proportion), gpus."""

    cpu_m: int
    gpu: int

    def requests(self) -> Requests:
        return Requests(self.cpu_m, self.cpu_m, self.gpu)

    def resources(self, n: int) -> dict[str, str]:
        out = {"cpu": f"{n * self.cpu_m}m", "memory": f"{n * self.cpu_m}Mi"}
        if self.gpu:
            out["nvidia.com/gpu"] = str(n * self.gpu)
        return out


@dataclass(frozen=True, slots=True)
class VictimDesign:
    key: str
    kind: str  # rigid | elastic | roles | loose-roles
    queue: str
    priority: int
    tasks: tuple[tuple[str, int, int | None], ...]  # (task name, replicas, task minAvailable or None)
    min_available: int
    preemptable: bool = True

    @property
    def replicas(self) -> int:
        return sum(r for _, r, _ in self.tasks)

    @property
    def roles_enforced(self) -> bool:
        """bundle.go CreateJobBundles: role minimums count only where minAvailable >= sum(minTaskMember)."""
        mins = [m for _, _, m in self.tasks if m is not None]
        return bool(mins) and self.min_available >= sum(mins)

    def role_minimum_binds(self) -> bool:
        """Some role sits at its minimum while the job as a whole can spare pods: the role rule decides which
        pods are safe (all pods bound, as wave 0 leaves them)."""
        if not self.roles_enforced or self.replicas <= self.min_available:
            return False
        return any(m is not None and m >= r for _, r, m in self.tasks)


@dataclass(slots=True)
class Design:
    scenario: str
    units_per_node: int
    nodes: int
    preemptor: str
    preemptor_queue: str
    preemptor_priority: int
    preemptor_units: int
    victims: list[VictimDesign]
    deserved: dict[str, int] = field(default_factory=dict)  # queue -> units (capacity plugin)
    guarantee: dict[str, int] = field(default_factory=dict)
    not_reclaimable: set[str] = field(default_factory=set)
    anchors: list[str] = field(default_factory=list)  # queues holding a 1-pod job that may not be evicted
    domains: int = 0  # tier-1 HyperNodes (topology scenario)
    nodes_per_domain: int = 0
    highest_tier: int = 0


@dataclass(slots=True)
class PreemptionWorkload(Workload):
    design: Design = None  # type: ignore[assignment]
    hypernodes: list[dict] = field(default_factory=list)

    @property
    def family(self) -> str:
        return "preemption"

    def task_split_fixed(self) -> set[str]:
        """Victim jobs whose evicted pods per task are fixed by Volcano's rules (not by UID order)."""
        return {v.key for v in self.design.victims if v.kind == "roles" and v.role_minimum_binds()}

    def eligible_domains(self) -> int:
        """Tier <= highestTierAllowed HyperNodes whose allocatable holds the preemptor's minimum resources
        (network-topology-aware isEligibleHyperNode for PurposeEvict): every tier-1 domain is sized to hold it."""
        d = self.design
        if d.scenario != "topology":
            return 0
        return d.domains if d.highest_tier == 1 else d.domains + 1

    def describe(self) -> list[str]:
        d = self.design
        lines = [f"scenario {d.scenario}: {d.nodes} nodes x {d.units_per_node} units"
                 + (f", {d.domains} tier-1 domains x {d.nodes_per_domain} nodes, hard highestTierAllowed="
                    f"{d.highest_tier}, maxDomains={MAX_DOMAINS}" if d.scenario == "topology" else "")]
        n = self.nodes[0]["status"]["capacity"]
        lines.append("node capacity: " + ", ".join(f"{k}={v}" for k, v in n.items() if k != "pods"))
        for q in self.queues:
            spec = q["spec"]
            extra = [f"{k}={spec[k]}" for k in ("deserved", "guarantee", "capability") if k in spec]
            if not spec.get("reclaimable", True):
                extra.append("reclaimable=false")
            lines.append(f"queue {q['metadata']['name']}: " + (" ".join(extra) or "-"))
        lines.append("priorityclasses: " + ", ".join(
            f"{p['metadata']['name']}={p['value']}" for p in self.priority_classes))
        lines += [g.describe() for g in self.gangs]
        return lines


def _pc(prefix: str, name: str) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{prefix}-{name}"},
            "value": PRIORITIES[name], "globalDefault": False}


def _queue(name: str, unit: Unit, deserved: int | None, guarantee: int = 0, reclaimable: bool = True) -> dict:
    spec: dict = {"weight": 1, "reclaimable": reclaimable}
    if deserved is not None:
        spec["deserved"] = unit.resources(deserved)
    if guarantee:
        spec["guarantee"] = {"resource": unit.resources(guarantee)}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _job(name: str, queue: str, wave: int, pc: str, unit: Unit, tasks: tuple[tuple[str, int, int | None], ...],
         min_available: int, *, preemptable: bool = True, topology: int | None = None) -> Gang:
    req = unit.requests()
    template_meta: dict = {}
    notes = []
    if not preemptable:
        template_meta["annotations"] = {PREEMPTABLE_ANNOTATION: "false"}
        notes.append("preemptable=false")
    spec: dict = {
        "schedulerName": SCHEDULER_NAME,
        "queue": queue,
        "minAvailable": min_available,
        "priorityClassName": pc,
        "tasks": [
            {
                "name": t,
                "replicas": r,
                **({"minAvailable": m} if m is not None else {}),
                "template": {
                    "metadata": {k: dict(v) for k, v in template_meta.items()},
                    "spec": {**_pod_spec(req, {}, [], pc), "restartPolicy": "Always"},
                },
            }
            for t, r, m in tasks
        ],
    }
    if topology is not None:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": topology}
        notes.append(f"networkTopology hard tier<={topology}")
    manifest = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    return Gang("job", name, queue, wave, pc, min_available, [Task(t, r, m, req) for t, r, m in tasks], [manifest],
                notes)


def _victim(rng: random.Random, key_name: str, kind: str, queue: str, priority: int, units: int,
            preemptable: bool = True) -> VictimDesign:
    """A victim job of `units` pods of the given kind (units >= 2; a role job needs 3)."""
    if kind in ("roles", "loose-roles") and units < 3:
        kind = "rigid"
    if kind == "rigid":
        return VictimDesign(f"job/{key_name}", kind, queue, priority, (("worker", units, None),), units, preemptable)
    if kind == "elastic":
        spare = rng.randint(1, max(1, units - 1))
        return VictimDesign(f"job/{key_name}", kind, queue, priority, (("worker", units, None),), units - spare,
                            preemptable)
    if kind == "roles":
        # One role at its minimum (ps), one with pods to spare (worker); the job can spare exactly the worker's
        # surplus, so the safe pods are the worker's whatever the UID order.
        ps = rng.randint(1, min(2, units - 2))
        workers = units - ps
        worker_min = rng.randint(1, workers - 1)
        return VictimDesign(f"job/{key_name}", kind, queue, priority,
                            (("ps", ps, ps), ("worker", workers, worker_min)), ps + worker_min, preemptable)
    # loose-roles: minAvailable below the sum of the task minimums, so Volcano does not enforce them.
    ps = rng.randint(1, min(2, units - 2))
    workers = units - ps
    task_min = (ps, workers)
    job_min = rng.randint(1, sum(task_min) - 1)
    return VictimDesign(f"job/{key_name}", kind, queue, priority,
                        (("ps", ps, task_min[0]), ("worker", workers, task_min[1])), job_min, preemptable)


def _kind(rng: random.Random) -> str:
    return rng.choices(["rigid", "elastic", "roles", "loose-roles"], weights=[0.35, 0.2, 0.35, 0.1])[0]


def generate(seed: int) -> PreemptionWorkload:
    rng = random.Random(f"preemption-{seed}")
    p = f"p{seed}"
    scenario = rng.choices(["preempt", "reclaim", "topology"], weights=[0.42, 0.3, 0.28])[0]
    unit = Unit(rng.choice([500, 1000]), 1 if rng.random() < 0.25 else 0)
    k = rng.choice([2, 4])  # units per node
    low = [PRIORITIES["low1"], PRIORITIES["low2"], PRIORITIES["low3"]]
    pcs = {v: n for n, v in PRIORITIES.items()}

    if scenario == "topology":
        domains = rng.randint(MAX_DOMAINS + 1, MAX_DOMAINS + 3)
        per_domain = rng.choice([1, 2]) if k == 2 else 1
        n_nodes = domains * per_domain
        total = n_nodes * k
        reclaim = rng.random() < 0.35
        victim_queue = f"{p}-qa" if reclaim else f"{p}-q0"
        pre_queue = f"{p}-qb" if reclaim else f"{p}-q0"
        kind = rng.choices(["rigid", "elastic"], weights=[0.55, 0.45])[0]
        victim = _victim(rng, f"{p}-v0", kind, victim_queue, PRIORITIES["low1"], total)
        pre_units = rng.randint(1, per_domain * k)
        deserved: dict[str, int] = {}
        if reclaim:
            deserved = {pre_queue: per_domain * k, victim_queue: total - per_domain * k}
        design = Design("topology", k, n_nodes, f"job/{p}-hi", pre_queue, PRIORITIES["high"], pre_units, [victim],
                        deserved=deserved, domains=domains, nodes_per_domain=per_domain, highest_tier=1)
    elif scenario == "reclaim":
        n_nodes = rng.randint(2, 4)
        total = n_nodes * k
        qa, qb = f"{p}-qa", f"{p}-qb"
        # qa keeps a job that may not be evicted (the anchor): with qa's share above zero after the eviction,
        # allocate serves qb (share 0) first. Without it both shares are 0, the queue order falls to creation
        # time and UID, and Volcano can give the freed nodes back to the victim and evict again, cycle after
        # cycle (seen: 440 evictions in 60 s).
        victim_units = rng.randint(max(2, total // 2), total - 1)
        victim = _victim(rng, f"{p}-v0", _kind(rng), qa, PRIORITIES["low1"], victim_units,
                         preemptable=rng.random() >= 0.06)
        qa_deserved = rng.randint(1, victim_units - 1)
        qb_deserved = total - qa_deserved
        idle = total - victim_units - 1
        pre_units = rng.randint(idle + 1, max(idle + 1, min(qb_deserved, total)))
        if rng.random() < 0.08:
            pre_units = min(total, qb_deserved + 1)  # asks more than its deserved share: not preemptive
        guarantee = {qa: rng.randint(1, qa_deserved)} if rng.random() < 0.2 else {}
        not_reclaimable = {qa} if rng.random() < 0.06 else set()
        design = Design("reclaim", k, n_nodes, f"job/{p}-hi", qb, PRIORITIES[rng.choice(["high", "low2"])],
                        pre_units, [victim], deserved={qa: qa_deserved, qb: qb_deserved}, guarantee=guarantee,
                        not_reclaimable=not_reclaimable, anchors=[qa])
    else:
        n_nodes = rng.randint(2, 4)
        total = n_nodes * k
        q0 = f"{p}-q0"
        bystander = rng.random() < 0.15
        left = total - rng.choice([0, 0, 1]) - bystander
        n_victims = min(rng.choice([1, 2, 2, 3]), left // 2)
        prios = sorted(rng.sample(low, n_victims))
        victims = []
        for i, prio in enumerate(prios):
            remaining = n_victims - i - 1
            units = left if remaining == 0 else rng.randint(2, left - 2 * remaining)
            victims.append(_victim(rng, f"{p}-v{i}", _kind(rng), q0, prio, units,
                                   preemptable=rng.random() >= 0.05))
            left -= units
        deserved = {q0: total}
        anchors = []
        if bystander:
            # The last victim moves to a queue with no deserved share, next to an anchor: gangreclaim, which runs
            # before gangpreempt, may take from it (reclaim ignores priority).
            v = victims[-1]
            victims[-1] = VictimDesign(v.key, v.kind, f"{p}-qx", v.priority, v.tasks, v.min_available,
                                       v.preemptable)
            deserved = {q0: total, f"{p}-qx": 0}
            anchors = [f"{p}-qx"]
        idle = total - sum(v.replicas for v in victims) - len(anchors)
        pre_prio = PRIORITIES["high"] if rng.random() >= 0.15 else PRIORITIES["mid"]
        pre_units = rng.randint(idle + 1, total)
        design = Design("preempt", k, n_nodes, f"job/{p}-hi", q0, pre_prio, pre_units, victims,
                        deserved=deserved, anchors=anchors)

    # ---- objects ---------------------------------------------------------------------------------------------
    nodes = []
    for i in range(design.nodes):
        res = unit.resources(k)
        node = _node(f"{p}-n{i}", 0, 0, 0, {ZONE_LABEL: "a"}, [])
        node["status"]["capacity"] = {**res, "pods": "110"}
        node["status"]["allocatable"] = {**res, "pods": "110"}
        nodes.append(node)
    hypernodes: list[dict] = []
    if design.scenario == "topology":
        for d in range(design.domains):
            members = [{"type": "Node", "selector": {"exactMatch": {"name": f"{p}-n{d * design.nodes_per_domain + j}"}}}
                       for j in range(design.nodes_per_domain)]
            hypernodes.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                               "metadata": {"name": f"{p}-s{d}"}, "spec": {"tier": 1, "members": members}})
        hypernodes.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                           "metadata": {"name": f"{p}-spine"},
                           "spec": {"tier": 2, "members": [
                               {"type": "HyperNode", "selector": {"exactMatch": {"name": f"{p}-s{d}"}}}
                               for d in range(design.domains)]}})
    queue_names = sorted({design.preemptor_queue, *(v.queue for v in design.victims), *design.anchors})
    queues = [_queue(q, unit, design.deserved.get(q), design.guarantee.get(q, 0), q not in design.not_reclaimable)
              for q in queue_names]
    used_prios = sorted({design.preemptor_priority, *(v.priority for v in design.victims),
                         *([PRIORITIES["low1"]] if design.anchors else [])})
    priority_classes = [_pc(p, pcs[v]) for v in used_prios]
    gangs = [_job(v.key.split("/", 1)[1], v.queue, 0, f"{p}-{pcs[v.priority]}", unit, v.tasks, v.min_available,
                  preemptable=v.preemptable) for v in design.victims]
    gangs += [_job(f"{p}-anchor{i}", q, 0, f"{p}-{pcs[PRIORITIES['low1']]}", unit, (("worker", 1, None),), 1,
                   preemptable=False) for i, q in enumerate(design.anchors)]
    gangs.append(_job(design.preemptor.split("/", 1)[1], design.preemptor_queue, 1,
                      f"{p}-{pcs[design.preemptor_priority]}", unit, (("worker", design.preemptor_units, None),),
                      design.preemptor_units, topology=design.highest_tier or None))
    return PreemptionWorkload(seed, nodes, queues, priority_classes, gangs, design=design, hypernodes=hypernodes)


# ---- the generator's reading of its own design --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Prediction:
    evicted: dict[str, int]
    broken: frozenset[str]
    preemptor_bound: bool


def _bundles(v: VictimDesign, local: int) -> tuple[int, int]:
    """(safe, whole) pod counts of a fully running victim with `local` pods in the domain (CreateJobBundles)."""
    surplus = v.replicas - v.min_available
    if v.roles_enforced:
        role_spare = sum(r - m if m is not None else r for _, r, m in v.tasks)
        surplus = min(surplus, role_spare)
    safe = max(0, min(surplus, local))
    return safe, local - safe


def predict(wl: PreemptionWorkload) -> Prediction:
    """What the design aims at, read from the design alone (one domain scan, all victims running)."""
    d = wl.design
    none = Prediction({}, frozenset(), False)
    per_domain_units = d.nodes_per_domain * d.units_per_node if d.scenario == "topology" else d.nodes * d.units_per_node
    if d.preemptor_units > per_domain_units:
        return none
    idle = per_domain_units - len(d.anchors) - sum(
        (d.nodes_per_domain * d.units_per_node if d.scenario == "topology" else v.replicas) for v in d.victims)
    if idle >= d.preemptor_units:
        return Prediction({}, frozenset(), True)
    need = d.preemptor_units - idle
    reclaim = d.preemptor_queue not in {v.queue for v in d.victims}
    order: list[tuple[VictimDesign, str, int]] = []
    if reclaim or any(v.queue != d.preemptor_queue for v in d.victims):
        # gangreclaim first: victims of other, reclaimable queues above their deserved share.
        pre_deserved = d.deserved.get(d.preemptor_queue)
        if pre_deserved is not None and d.preemptor_units > pre_deserved:
            cands = []
        else:
            cands = [v for v in d.victims if v.queue != d.preemptor_queue and v.queue not in d.not_reclaimable
                     and v.preemptable]
        # Capacity's guarantee/deserved filter (its UnifiedEvictable) sits in tier 2; the tier-1 plugins
        # (priority, gang, conformance) permit every candidate and session_plugins.go UnifiedEvictable returns the
        # first tier's answer, so under this conf it is never asked.
        for v in cands:
            local = per_domain_units if d.scenario == "topology" else v.replicas
            safe, whole = _bundles(v, local)
            if safe:
                order.append((v, "safe", safe))
            if whole:
                order.append((v, "whole", whole))
        got = _take(order, need)
        if got is not None:
            return Prediction(got, frozenset(k for k, n in got.items() if _breaks(wl, k, n)), True)
    # gangpreempt: same queue, strictly lower priority.
    cands = [v for v in d.victims if v.queue == d.preemptor_queue and v.priority < d.preemptor_priority
             and v.preemptable]
    cands.sort(key=lambda v: v.priority)
    order = []
    for v in cands:
        local = per_domain_units if d.scenario == "topology" else v.replicas
        safe, _ = _bundles(v, local)
        if safe:
            order.append((v, "safe", safe))
    for v in cands:
        local = per_domain_units if d.scenario == "topology" else v.replicas
        safe, whole = _bundles(v, local)
        if whole:
            order.append((v, "whole", whole))
    got = _take(order, need)
    if got is None:
        return none
    return Prediction(got, frozenset(k for k, n in got.items() if _breaks(wl, k, n)), True)


def _take(order: list[tuple[VictimDesign, str, int]], need: int) -> dict[str, int] | None:
    freed = 0
    out: dict[str, int] = {}
    for v, _, n in order:
        if n <= 0:
            continue
        out[v.key] = out.get(v.key, 0) + n
        freed += n
        if freed >= need:
            return out
    return None


def _breaks(wl: PreemptionWorkload, key: str, evicted: int) -> bool:
    v = next(v for v in wl.design.victims if v.key == key)
    return v.replicas - evicted < v.min_available


def designed_coverage(wls: list[PreemptionWorkload]) -> dict[str, int]:
    """The coverage the generator aims at, from `predict` (what the family's report counts from Volcano)."""
    out = dict.fromkeys(TARGETS, 0)
    for wl in wls:
        pr = predict(wl)
        out["evicted"] += bool(pr.evicted)
        out["whole_bundle"] += bool(pr.broken)
        out["role_minimums"] += any(k in wl.task_split_fixed() for k in pr.evicted)
        out["topology_over_max_domains"] += bool(pr.evicted) and wl.eligible_domains() > MAX_DOMAINS
    return out
