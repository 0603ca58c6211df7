"""Layer `ctl`: `volcano-py explain` decides which gate holds a job, from what the scheduler publishes.

Pure: `explain(facts)` reads the fetched objects (Job, PodGroup, Queue, the queue's PodGroups, events) and
returns an `Explanation`; `render` turns it into one screen of text. The numbers come from the messages the
scheduler writes into the PodGroup's `Unschedulable` condition (enqueue's queue state, proportion's capability
sum, overcommit's cluster sum, gang's shortfall, network-topology-aware's best domain), cross-checked with the
Queue object, so the command needs only read access to the API, from any machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduler.jobs.expand import depends_on

Obj = Mapping[str, Any]

FINISHED_JOB_PHASES = frozenset({"Completed", "Failed", "Terminated", "Aborted"})
WAITING_PHASES = ("Pending", "Inqueue")


class Gate(StrEnum):
    NOT_HELD = "not held"
    TASK_ORDER = "task launch order"
    JOB_STOPPED = "job stopped"
    NO_PODGROUP = "no PodGroup"
    QUEUE_MISSING = "queue missing"
    QUEUE_CLOSED = "queue closed"
    QUEUE_CAPABILITY = "queue capability"
    QUEUE_NOT_LEAF = "queue not a leaf"
    OVERCOMMIT = "overcommit"
    ENQUEUE = "enqueue"
    TOPOLOGY = "network topology"
    GANG_SHORTFALL = "gang shortfall"
    FRAGMENTED = "gang fragmented"
    GANG_TASKS = "gang tasks"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class Facts:
    """What explain reads; `target` is what the user named (e.g. `job ml/train`)."""

    target: str
    namespace: str
    job: Obj | None = None
    podgroup: Obj | None = None
    queue: Obj | None = None
    queue_podgroups: Sequence[Obj] = ()
    priorities: Mapping[str, int] = field(default_factory=dict)
    events: Sequence[Obj] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    target: str
    gate: Gate
    summary: str
    queue: str = ""
    phase: str = ""
    numbers: tuple[tuple[str, str], ...] = ()
    unblock: tuple[str, ...] = ()
    rank: tuple[int, int] | None = None
    published: str = ""


# ---- the scheduler's messages --------------------------------------------------------------------------

NUM = r"-?[0-9.]+(?:Gi)?"
CAPABILITY = re.compile(
    r"queue (?P<queue>\S+) (?P<real>real )?capability (?P<res>\S+) (?P<limit>" + NUM + r")"
    r"(?: \([^)]*\))?: (?P<allocated>" + NUM + r") allocated(?: - (?P<elastic>" + NUM +
    r") elastic)? \+ (?P<admitted>" + NUM + r") admitted \+ (?P<requested>" + NUM +
    r") requested = (?P<total>" + NUM + r") > \S+ \(short \S+ (?P<short>" + NUM + r")\)"
)
OVERCOMMIT = re.compile(
    r"cluster (?P<res>\S+) (?P<cluster>\S+) x overcommit-factor (?P<factor>\S+) = (?P<capacity>\S+): "
    r"(?P<used>\S+) used \+ (?P<admitted>\S+) admitted \+ (?P<requested>\S+) requested = (?P<total>\S+) > \S+ "
    r"\(short \S+ (?P<short>[^)]+)\)"
)
GANG_HEAD = re.compile(
    r"(?P<unschedulable>\d+)/(?P<tasks>\d+) tasks in gang unschedulable: pod group is not ready, "
    r"(?P<ready>\d+) ready, (?P<min>\d+) minAvailable"
)
SHORT = re.compile(
    r"short (?P<short>[^:]+): (?P<count>\d+) more tasks need (?P<need>.+?), "
    r"the (?P<nodes>\d+) nodes they may use have (?P<free>.+?) free"
)
FRAGMENTS = re.compile(
    r"enough (?P<need>.+?) is free in total but it is fragmented: the most on one node is (?P<most>.+?) "
    r"\((?P<node>[^)]+)\)"
)
TOPOLOGY = re.compile(
    r"needs (?P<need>\S+) (?P<res>\S+) inside one (?P<where>.+?) \(hard mode, highestTierAllowed (?P<tier>\d+)\); "
    r"(?:the best (?:.+?) has (?P<best>\S+) free(?P<pieces>, but not in pieces its tasks fit)?|no node allows them)"
)
NOT_LEAF = re.compile(r"queue (?P<queue>\S+) has child queues \((?P<children>[^)]*)\): jobs go to leaf queues")
TOPOLOGY_NO_NODE = re.compile(r"the gang's tasks fit no node \(hard mode, highestTierAllowed (?P<tier>\d+)\)")
TASKS = re.compile(r"Not enough (?:valid tasks|pods of task (?P<task>\S+)) for gang-scheduling, "
                   r"valid: (?P<valid>\d+), min: (?P<min>\d+)")


def amount(text: str) -> float:
    """`3`, `0.5`, `12Gi` -> a number in the unit shown."""
    return float(text.removesuffix("Gi"))


def show(value: float, like: str = "") -> str:
    unit = "Gi" if like.endswith("Gi") else ""
    return f"{value:g}{unit}"


def pairs(text: str) -> dict[str, str]:
    """`nvidia.com/gpu 3, cpu 2` -> {"nvidia.com/gpu": "3", "cpu": "2"}."""
    out: dict[str, str] = {}
    for part in text.split(", "):
        name, _, value = part.rpartition(" ")
        if name:
            out[name] = value
    return out


# ---- reading the objects -------------------------------------------------------------------------------

def _status(obj: Obj | None) -> Obj:
    return (obj or {}).get("status") or {}


def _spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def _name(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("name") or "")


def unschedulable(podgroup: Obj | None) -> Obj | None:
    for condition in _status(podgroup).get("conditions") or ():
        if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def latest_warning(events: Sequence[Obj]) -> Obj | None:
    warnings = [e for e in events if e.get("type") == "Warning"]
    stamp = lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or  # noqa: E731
                          (e.get("metadata") or {}).get("creationTimestamp") or "")
    return max(warnings, key=stamp) if warnings else None


def queue_state(queue: Obj | None) -> str:
    return str(_status(queue).get("state") or _spec(queue).get("state") or "Open")


def queue_name(facts: Facts) -> str:
    return str(_spec(facts.podgroup).get("queue") or _spec(facts.job).get("queue") or "default")


def priority_of(podgroup: Obj, priorities: Mapping[str, int]) -> int:
    return int(priorities.get(str(_spec(podgroup).get("priorityClassName") or ""), 0))


def is_waiting(podgroup: Obj) -> bool:
    return str(_status(podgroup).get("phase") or "Pending") in WAITING_PHASES


def rank_in_queue(podgroup: Obj, others: Sequence[Obj], priorities: Mapping[str, int]) -> tuple[int, int] | None:
    """1-based rank of `podgroup` among the queue's waiting PodGroups, by priority then creation time."""
    def order(pg: Obj) -> tuple[int, str, str, str]:
        meta = pg.get("metadata") or {}
        return (-priority_of(pg, priorities), str(meta.get("creationTimestamp") or ""),
                str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def key(pg: Obj) -> tuple[str, str]:
        meta = pg.get("metadata") or {}
        return str(meta.get("namespace")), str(meta.get("name"))

    waiting = {key(pg): pg for pg in others if is_waiting(pg)}
    waiting[key(podgroup)] = podgroup
    ranked = sorted(waiting.values(), key=order)
    position = [key(pg) for pg in ranked].index(key(podgroup))
    return position + 1, len(ranked)


# ---- the decision ----------------------------------------------------------------------------------------

def explain(facts: Facts) -> Explanation:
    """Which gate holds the job, the numbers behind it, what would unblock it and its place in its queue."""
    ex = decide(facts)
    context = context_numbers(facts)
    return _with(ex, ex.gate, ex.summary, numbers=ex.numbers + context) if context else ex


def context_numbers(facts: Facts) -> tuple[tuple[str, str], ...]:
    """The queue's GPUs (allocated, deserved, capability) and the Job's pod counts, when they exist."""
    out: list[tuple[str, str]] = []
    if facts.queue is not None:
        gpu = "nvidia.com/gpu"
        allocated = (_status(facts.queue).get("allocated") or {}).get(gpu, 0)
        deserved = (_spec(facts.queue).get("deserved") or {}).get(gpu, "-")
        capability = (_spec(facts.queue).get("capability") or {}).get(gpu, "-")
        out.append((f"queue {_name(facts.queue)} GPUs",
                    f"allocated {allocated}, deserved {deserved}, capability {capability}"))
    status = _status(facts.job)
    if facts.job is not None and status:
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("pending", "running", "succeeded", "failed"))
        out.append(("job pods", f"{counts}; minAvailable {status.get('minAvailable', '-')}"))
    return tuple(out)


def decide(facts: Facts) -> Explanation:
    """The gate, its numbers and the way out, from the PodGroup's condition (or its latest warning event)."""
    queue = queue_name(facts)
    job_phase = str((_status(facts.job).get("state") or {}).get("phase") or "")
    pg = facts.podgroup
    pg_phase = str(_status(pg).get("phase") or "Pending") if pg is not None else ""
    phase = job_phase or pg_phase
    base = Explanation(facts.target, Gate.WAITING, "", queue=queue, phase=phase)
    if job_phase in FINISHED_JOB_PHASES:
        unblock = (f"volcano-py job resume {_name(facts.job)} -n {facts.namespace}",) if job_phase == "Aborted" \
            else ()
        return _with(base, Gate.JOB_STOPPED, f"the job is {job_phase}: nothing is scheduled for it", unblock=unblock)
    if pg is None:
        return _with(base, Gate.NO_PODGROUP, "no PodGroup exists for it yet",
                     unblock=("check that `volcano-py controllers` runs and acts on this job's schedulerName",))
    rank = rank_in_queue(pg, facts.queue_podgroups, facts.priorities)
    base = _with(base, Gate.WAITING, "", rank=rank)
    condition = unschedulable(pg)
    published = str((condition or {}).get("message") or "")
    if not published:
        event = latest_warning(facts.events)
        published = str((event or {}).get("message") or "") if pg_phase in WAITING_PHASES else ""
    base = _with(base, Gate.WAITING, "", published=published)
    if pg_phase not in WAITING_PHASES and condition is None:
        held_back = waiting_on_depends(facts.job)
        if held_back:
            task, deps = held_back[0]
            shown = ", ".join(f"{d} {running}/{needed} running" for d, running, needed in deps)
            return _with(base, Gate.TASK_ORDER, f"task {task} has no pods yet: it waits for {shown} (dependsOn)",
                         rank=None, numbers=tuple((f"{d} running", f"{r}/{n}") for d, r, n in deps),
                         unblock=(f"wait for {', '.join(d for d, _, _ in deps)} to run; see `kubectl describe "
                                  f"pod` of those tasks' pods if they do not start",))
        return _with(base, Gate.NOT_HELD, f"not held: its PodGroup is {pg_phase}", rank=None)
    if facts.queue is None or "does not exist" in published:
        return _with(base, Gate.QUEUE_MISSING, f"queue {queue} does not exist",
                     unblock=(f"create queue {queue}, or submit the job to an existing queue",))
    state = queue_state(facts.queue)
    if state != "Open" and pg_phase == "Pending":
        return _with(base, Gate.QUEUE_CLOSED, f"queue {queue} is {state}: it admits no new jobs",
                     numbers=(("queue state", state),),
                     unblock=(f"open queue {queue} (volcano-py queue open {queue}), or submit to an Open queue",))
    if (match := NOT_LEAF.search(published)) is not None:
        children = match["children"]
        return _with(base, Gate.QUEUE_NOT_LEAF, f"queue {match['queue']} has child queues; jobs run in leaf queues "
                     "only (capacity with enableHierarchy)", numbers=(("child queues", children),),
                     unblock=(f"submit the job to one of {match['queue']}'s child queues: {children}",))
    if (match := CAPABILITY.search(published)) is not None:
        return _capability(base, match, facts.queue)
    if (match := OVERCOMMIT.search(published)) is not None:
        return _overcommit(base, match)
    if (match := TASKS.search(published)) is not None:
        return _tasks(base, match)
    if (match := TOPOLOGY.search(published)) is not None:
        return _topology(base, match)
    if (match := TOPOLOGY_NO_NODE.search(published)) is not None:
        return _with(base, Gate.TOPOLOGY, f"no node holds the gang's tasks (hard mode, highestTierAllowed "
                     f"{match['tier']})", unblock=("check the tasks' requests, nodeSelector and tolerations",))
    head = GANG_HEAD.search(published)
    if (match := SHORT.search(published)) is not None:
        return _shortfall(base, match, head)
    if (match := FRAGMENTS.search(published)) is not None:
        return _fragmented(base, match, head)
    if head is not None:
        return _with(base, Gate.GANG_SHORTFALL, "the gang cannot be placed whole", numbers=_head(head),
                     unblock=("see the published message: free capacity on nodes its pods may use, "
                              "or lower minAvailable",))
    if condition is not None and condition.get("reason") == "NotEnqueued":
        return _with(base, Gate.ENQUEUE, "held at enqueue", unblock=("see the published message",))
    return _with(base, Gate.WAITING, "the scheduler has not reported on it yet (is it running, and does the "
                 "pod's schedulerName match?)")


def waiting_on_depends(job: Obj | None) -> list[tuple[str, list[tuple[str, int, int]]]]:
    """Tasks of a Job that have no pods and name a dependsOn, with (task, Running pods, needed) per dependency,
    from the Job's spec and its status.taskStatusCount (the controller's counts)."""
    if job is None:
        return []
    tasks = list((job.get("spec") or {}).get("tasks") or [])
    counts = (_status(job).get("taskStatusCount") or {})
    out = []
    for task in tasks:
        deps = depends_on(task)
        if not deps or sum(((counts.get(task.get("name")) or {}).get("phase") or {}).values()):
            continue
        rows = []
        for dep in deps:
            spec: Obj = next((t for t in tasks if t.get("name") == dep), {})
            needed = int(spec.get("minAvailable", spec.get("replicas", 1)) or 0)
            running = int(((counts.get(dep) or {}).get("phase") or {}).get("Running", 0))
            rows.append((dep, running, needed))
        out.append((str(task.get("name")), rows))
    return out


def _with(base: Explanation, gate: Gate, summary: str, **changes: Any) -> Explanation:
    fields = {name: getattr(base, name) for name in Explanation.__slots__}  # type: ignore[attr-defined]
    fields.update(gate=gate, summary=summary, **changes)
    return Explanation(**fields)


def _head(head: re.Match[str] | None) -> tuple[tuple[str, str], ...]:
    if head is None:
        return ()
    return (("tasks unschedulable", f"{head['unschedulable']}/{head['tasks']}"), ("ready", head["ready"]),
            ("minAvailable", head["min"]))


def _capability(base: Explanation, m: re.Match[str], queue: Obj | None) -> Explanation:
    res, queue_name_ = m["res"], m["queue"]
    limit, total, short = amount(m["limit"]), amount(m["total"]), amount(m["short"])
    held = amount(m["allocated"]) + amount(m["admitted"])
    kind = "real capability" if m["real"] else "capability"
    numbers = [(f"queue {kind} {res}", m["limit"]), ("allocated", m["allocated"]), ("admitted", m["admitted"]),
               ("requested", m["requested"]), ("total", f"{m['total']} > {m['limit']}"), ("short", m["short"])]
    deserved = (_spec(queue).get("deserved") or {}).get(res)
    if deserved is not None:
        numbers.append(("queue deserved", str(deserved)))
    unblock = [f"raise queue {queue_name_} capability {res} to at least {show(total, m['total'])}"
               if not m["real"] else f"add {show(short, m['short'])} {res} to the cluster or lower other queues' "
               f"guarantees"]
    if held >= short:
        unblock.append(f"or wait for {show(short, m['short'])} {res} of queue {queue_name_} to be released")
    else:
        unblock.append(f"or lower the job's request: it asks for {m['requested']} and the queue may hold "
                       f"{show(limit, m['limit'])}")
    summary = f"queue {queue_name_} {kind}: {m['total']} {res} would exceed {m['limit']} (short {m['short']})"
    return _with(base, Gate.QUEUE_CAPABILITY, summary, numbers=tuple(numbers), unblock=tuple(unblock))


def _overcommit(base: Explanation, m: re.Match[str]) -> Explanation:
    res = m["res"]
    numbers = (("cluster " + res, m["cluster"]), ("overcommit-factor", m["factor"]), ("capacity", m["capacity"]),
               ("used", m["used"]), ("admitted", m["admitted"]), ("requested", m["requested"]),
               ("short", m["short"]))
    unblock = (f"wait for {m['short']} {res} to be released in the cluster, add nodes, "
               f"or raise the overcommit plugin's overcommit-factor",)
    summary = f"cluster {res} overcommitted: {m['total']} > {m['capacity']} (short {m['short']})"
    return _with(base, Gate.OVERCOMMIT, summary, numbers=numbers, unblock=unblock)


def _tasks(base: Explanation, m: re.Match[str]) -> Explanation:
    which = f"task {m['task']}" if m["task"] else "the job"
    summary = f"{which} has {m['valid']} live pods, fewer than its minimum {m['min']}"
    unblock = (f"look at {which}'s failed or deleted pods, or lower its minAvailable to {m['valid']}",)
    return _with(base, Gate.GANG_TASKS, summary, numbers=(("valid", m["valid"]), ("min", m["min"])),
                 unblock=unblock)


def _topology(base: Explanation, m: re.Match[str]) -> Explanation:
    res, where = m["res"], m["where"]
    numbers = [("needs", f"{m['need']} {res} inside one {where}"), ("highestTierAllowed", m["tier"])]
    if m["best"] is not None:
        numbers.append((f"best {where} has free", m["best"]))
        missing = amount(m["need"]) - amount(m["best"])
        if m["pieces"] or missing <= 0:
            first = f"free {res} on single nodes of one {where} in pieces the tasks fit"
        else:
            first = f"free {show(missing, m['need'])} more {res} inside one {where}"
        summary = f"no {where} can hold the gang: it needs {m['need']} {res}, the best {where} has {m['best']} free"
    else:
        first = f"let the pods use nodes with {res}"
        summary = f"no node allows the gang's pods inside one {where}"
    unblock = (first, f"or allow a higher tier (networkTopology.highestTierAllowed > {m['tier']}) or mode: soft")
    return _with(base, Gate.TOPOLOGY, summary, numbers=tuple(numbers), unblock=unblock)


def _shortfall(base: Explanation, m: re.Match[str], head: re.Match[str] | None) -> Explanation:
    short, need, free = pairs(m["short"]), pairs(m["need"]), pairs(m["free"])
    numbers = list(_head(head))
    for res, value in short.items():
        numbers.append((res, f"{m['count']} more tasks need {need.get(res, '?')}, {free.get(res, '?')} free on "
                             f"the {m['nodes']} nodes they may use, short {value}"))
    shortages = ", ".join(f"{value} more {res}" for res, value in short.items())
    unblock = [f"free {shortages} on nodes the gang may use"]
    if head is not None:
        unblock.append(f"or lower minAvailable (now {head['min']})")
    summary = f"gang short of {m['short']}: the pods it still needs do not fit in what is free"
    return _with(base, Gate.GANG_SHORTFALL, summary, numbers=tuple(numbers), unblock=tuple(unblock))


def _fragmented(base: Explanation, m: re.Match[str], head: re.Match[str] | None) -> Explanation:
    numbers = (*_head(head), ("needs", m["need"]), ("most free on one node", f"{m['most']} ({m['node']})"))
    summary = f"enough {m['need']} is free in total, but split across nodes"
    unblock = ("free whole nodes (drain smaller pods) so each task fits on one node",
               "or make the tasks smaller")
    return _with(base, Gate.FRAGMENTED, summary, numbers=numbers, unblock=unblock)


# ---- output --------------------------------------------------------------------------------------------

def render(ex: Explanation) -> str:
    lines = [f"{ex.target}: {ex.phase or 'unknown phase'} in queue {ex.queue}"]
    lines.append(f"gate:    {ex.gate}: {ex.summary}")
    if ex.rank is not None:
        lines.append(f"queue:   #{ex.rank[0]} of {ex.rank[1]} waiting in queue {ex.queue} (by priority, then age)")
    if ex.numbers:
        lines.append("numbers:")
        width = max(len(k) for k, _ in ex.numbers)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in ex.numbers]
    if ex.unblock:
        lines.append("unblock: " + ex.unblock[0])
        lines += [f"         {u}" for u in ex.unblock[1:]]
    if ex.published:
        lines.append(f"published: {ex.published}")
    return "\n".join(lines)


def to_dict(ex: Explanation) -> dict[str, Any]:
    return {"target": ex.target, "phase": ex.phase, "queue": ex.queue, "gate": str(ex.gate),
            "summary": ex.summary, "numbers": dict(ex.numbers), "unblock": list(ex.unblock),
            "rank": list(ex.rank) if ex.rank else None, "published": ex.published}
