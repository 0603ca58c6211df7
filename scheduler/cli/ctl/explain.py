"""Layer `ctl`: `volcano-py explain` decides which gate holds a job, from what the scheduler publishes.

Pure: `explain(facts)` reads the fetched objects (Job, PodGroup, Queue, the queue's PodGroups, events) and
returns an `Explanation`; `render` turns it into one screen of text. The numbers come from the reasons the
scheduler publishes on the PodGroup as JSON (the annotation `scheduling.volcano-py.io/reasons`, see
`api/decision.py`: enqueue's queue state, proportion's and capacity's queue limits, overcommit's cluster sum,
gang's shortfall, network-topology-aware's best domain), cross-checked with the Queue object, so the command
needs only read access to the API, from any machine. The condition's message is shown as the scheduler wrote it
and never parsed: a PodGroup without the annotation (written by an older scheduler) is said to have no
structured reasons. The evictions a job suffered or caused: from the events' causes (ctl/explain_evictions.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from scheduler.api import reasons as R
from scheduler.api.decision import REASONS_ANNOTATION, Status, read_published
from scheduler.api.messages import render as render_reason, show, show_amounts
from scheduler.api.objects import Obj
from scheduler.api.reasons import ReasonError
from scheduler.cli.ctl.explain_evictions import EvictionSeen, eviction_line, evictions_seen
from scheduler.jobs.expand import depends_on

ReasonT = TypeVar("ReasonT", bound=R.Reason)

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
    QUEUE_TREE = "queue tree broken"
    QUEUE_SHARE = "queue share"
    OVERCOMMIT = "overcommit"
    ENQUEUE = "enqueue"
    TOPOLOGY = "network topology"
    GANG_SHORTFALL = "gang shortfall"
    FRAGMENTED = "gang fragmented"
    GANG_TASKS = "gang tasks"
    SCHEDULING_GATED = "scheduling gates"
    RESERVING = "reserving"
    PARTIAL = "partial gang given up"
    SCHEDULER_ERROR = "scheduler error"
    NO_REASONS = "no structured reasons"
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
    pod_evictions: Sequence[Obj] = ()  # the namespace's `Evict` events on pods (the cause is in an annotation)


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
    reasons: tuple[R.Reason, ...] = ()  # what the scheduler published, as it published it
    evictions: tuple[EvictionSeen, ...] = ()


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
    def stamp(e: Obj) -> str:
        return str(e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")
                   or "")

    warnings = [e for e in events if e.get("type") == "Warning"]
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
    ex = holding_gate(facts)
    context = context_numbers(facts)
    ex = _with(ex, ex.gate, ex.summary, numbers=ex.numbers + context) if context else ex
    seen = evictions_seen(f"{facts.namespace}/{_name(facts.podgroup)}", facts.pod_evictions, facts.events) \
        if facts.podgroup is not None else ()
    return _with(ex, ex.gate, ex.summary, evictions=seen) if seen else ex


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


def holding_gate(facts: Facts) -> Explanation:
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
    decision, unreadable = published_decision(pg)
    found = decision.reasons if decision is not None else ()
    base = _with(base, Gate.WAITING, "", reasons=found)
    missing = _first(found, R.QueueMissing)
    if facts.queue is None or missing is not None:
        return _with(base, Gate.QUEUE_MISSING, f"queue {queue} does not exist",
                     unblock=(f"create queue {queue}, or submit the job to an existing queue",))
    state = queue_state(facts.queue)
    if state != "Open" and pg_phase == "Pending":
        return _with(base, Gate.QUEUE_CLOSED, f"queue {queue} is {state}: it admits no new jobs",
                     numbers=(("queue state", state),),
                     unblock=(f"open queue {queue} (volcano-py queue open {queue}), or submit to an Open queue",))
    if decision is None:
        if unreadable:
            return _with(base, Gate.NO_REASONS, f"the published reasons cannot be read ({unreadable})",
                         unblock=("use an explain as new as the scheduler; the message below is as it wrote it",))
        if published:
            return _with(base, Gate.NO_REASONS, "no structured reasons published (a scheduler older than this "
                         "explain wrote the message below)", unblock=("see the published message",))
        return _with(base, Gate.WAITING, "the scheduler has not reported on it yet (is it running, and does the "
                     "pod's schedulerName match?)")
    return from_reasons(base, found, facts.queue, condition)


def published_decision(podgroup: Obj | None) -> tuple[Status | None, str]:
    """The Status the scheduler published on the PodGroup, or (None, why it cannot be read; "" if absent)."""
    text = (((podgroup or {}).get("metadata") or {}).get("annotations") or {}).get(REASONS_ANNOTATION)
    if not text:
        return None, ""
    try:
        return read_published(str(text)), ""
    except ReasonError as exc:
        return None, str(exc)


def _first(found: Sequence[R.Reason], kind: type[ReasonT]) -> ReasonT | None:
    return next((r for r in found if isinstance(r, kind)), None)


def _all(found: Sequence[R.Reason], kind: type[ReasonT]) -> list[ReasonT]:
    return [r for r in found if isinstance(r, kind)]


def from_reasons(base: Explanation, found: Sequence[R.Reason], queue: Obj | None,
                 condition: Obj | None) -> Explanation:
    """The gate of the first reason that names one, most specific first (a gate that held the job at enqueue or
    in its queue before any shortfall on nodes)."""
    head = _first(found, R.GangNotReady)
    if (error := _first(found, R.PluginError)) is not None:  # it was left out of the cycle: nothing else counts
        return _with(base, Gate.SCHEDULER_ERROR, render_reason(error), numbers=(
            ("plugin", error.plugin), ("action", error.action), ("error", error.error)),
            unblock=("look for a value in this job's PodGroup, pods or queue that the plugin could not handle "
                     "(the scheduler's log names the job once) and correct it; if none, report the error",))
    if (leaf := _first(found, R.QueueNotLeaf)) is not None:
        children = ", ".join(leaf.children)
        return _with(base, Gate.QUEUE_NOT_LEAF, f"queue {leaf.queue} has child queues; jobs run in leaf queues "
                     "only (capacity with enableHierarchy)", numbers=(("child queues", children),),
                     unblock=(f"submit the job to one of {leaf.queue}'s child queues: {children}",))
    if (closed := _first(found, R.QueueClosed)) is not None:  # the Queue is Open again: next cycle admits it
        return _with(base, Gate.QUEUE_CLOSED, f"{render_reason(closed)} (when the scheduler last looked)",
                     unblock=(f"open queue {closed.queue} (volcano-py queue open {closed.queue})",))
    if (broken := _first(found, R.QueueParentMissing) or _first(found, R.QueueParentCycle)) is not None:
        return _with(base, Gate.QUEUE_TREE, render_reason(broken),
                     unblock=(f"fix spec.parent of queue {broken.at}",))
    limits = _all(found, R.QueueLimit)
    if (limit := next((r for r in limits if r.limit != R.DESERVED), None)) is not None:
        return _capability(base, limit, queue)
    if (over := _first(found, R.OvercommitLimit)) is not None:
        return _overcommit(base, over)
    if (few := _first(found, R.TooFewTasks)) is not None:
        return _tasks(base, few)
    if (gated := _first(found, R.SchedulingGated)) is not None:
        return _with(base, Gate.SCHEDULING_GATED, render_reason(gated), numbers=(("gated pods", str(gated.tasks)),),
                     unblock=(f"remove the scheduling gate {gated.gate} from the pods (whoever set it does so "
                              "when its condition holds)",))
    if (topo := _first(found, R.TopologyLimit) or _first(found, R.TopologyNoNode)) is not None:
        return _topology(base, topo)
    if (nofit := _first(found, R.TopologyNoFit)) is not None:
        return _with(base, Gate.TOPOLOGY, f"no node holds the gang's tasks (hard mode, highestTierAllowed "
                     f"{nofit.tier})", unblock=("check the tasks' requests, nodeSelector and tolerations",))
    if (partial := _first(found, R.PartialGangTimeout)) is not None:
        return _with(base, Gate.PARTIAL, render_reason(partial), numbers=(
            ("ready", f"{partial.ready}/{partial.min_available}"), ("kept bound", str(partial.kept))),
            unblock=("delete the bound pods no controller owns, or add pods so the gang fits",))
    # Nodes short of what the gang needs outrank a deserved-share refusal: with the whole share the gang would
    # still not fit, so freeing capacity is what unblocks it.
    if shortfalls := _all(found, R.ResourceShortfall):
        return _shortfall(base, shortfalls, head)
    if (fragmented := _first(found, R.Fragmented)) is not None:
        return _fragmented(base, fragmented, head)
    if (deserved := next((r for r in limits if r.limit == R.DESERVED), None)) is not None:
        res = deserved.resource
        return _with(base, Gate.QUEUE_SHARE, render_reason(deserved), numbers=(
            *_head(head), (f"queue deserved {res}", show(res, deserved.limit_amount)),
            ("allocated", show(res, deserved.allocated)), ("requested", show(res, deserved.requested)),
            ("short", show(res, deserved.short))),
            unblock=(f"wait for queue {deserved.queue}'s jobs to release {show(res, deserved.short)} {res}, or "
                     "raise its weight or deserved share",))
    if (share := _first(found, R.QueueOverused) or _first(found, R.QueueShareExceeded)) is not None:
        return _with(base, Gate.QUEUE_SHARE, render_reason(share), numbers=_head(head),
                     unblock=(f"wait for queue {share.queue}'s jobs to release resources, or raise its weight "
                              "or deserved share",))
    if (reserving := _first(found, R.Reserving)) is not None:
        return _with(base, Gate.RESERVING, render_reason(reserving), numbers=_head(head),
                     unblock=("wait: it collects what running pods free until it is ready",))
    if head is not None:
        return _with(base, Gate.GANG_SHORTFALL, "the gang cannot be placed whole",
                     numbers=_head(head) + _filters(_first(found, R.NodesUnavailable)),
                     unblock=("see the published message: free capacity on nodes its pods may use, "
                              "or lower minAvailable",))
    if condition is not None and condition.get("reason") == "NotEnqueued":
        return _with(base, Gate.ENQUEUE, "held at enqueue", unblock=("see the published message",))
    return _with(base, Gate.WAITING, "waiting: " + "; ".join(render_reason(r) for r in found))


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
    fields = {name: getattr(base, name) for name in Explanation.__slots__}
    fields.update(gate=gate, summary=summary, **changes)
    return Explanation(**fields)


def _head(head: R.GangNotReady | None) -> tuple[tuple[str, str], ...]:
    if head is None:
        return ()
    return (("tasks unschedulable", f"{head.unschedulable}/{head.tasks}"), ("ready", str(head.ready)),
            ("minAvailable", str(head.min_available)))


def _filters(unavailable: R.NodesUnavailable | None) -> tuple[tuple[str, str], ...]:
    if unavailable is None:
        return ()
    return tuple((render_reason(c.filter), f"{c.nodes} of {unavailable.total} nodes") for c in unavailable.counts)


def _capability(base: Explanation, r: R.QueueLimit, queue: Obj | None) -> Explanation:
    res = r.resource

    def amount(units: int) -> str:
        return show(res, units)

    kind = "capability" if r.limit == R.CAPABILITY else "real capability"
    numbers = [(f"queue {kind} {res}", amount(r.limit_amount))]
    if r.limit == R.PARENT_CAPABILITY:
        numbers.append(("from parent", r.parent))
    numbers += [("allocated", amount(r.allocated)), ("admitted", amount(r.admitted)),
                ("requested", amount(r.requested)), ("total", f"{amount(r.total)} > {amount(r.limit_amount)}"),
                ("short", amount(r.short))]
    if r.elastic:
        numbers.insert(2, ("elastic", amount(r.elastic)))
    deserved = (_spec(queue).get("deserved") or {}).get(res)
    if deserved is not None:
        numbers.append(("queue deserved", str(deserved)))
    if r.limit == R.CAPABILITY:
        unblock = [f"raise queue {r.queue} capability {res} to at least {amount(r.total)}"]
    elif r.limit == R.PARENT_CAPABILITY:
        unblock = [f"raise queue {r.parent}'s capability {res}, or lower its other children's guarantees"]
    else:
        unblock = [f"add {amount(r.short)} {res} to the cluster or lower other queues' guarantees"]
    if r.allocated + r.admitted >= r.short:
        unblock.append(f"or wait for {amount(r.short)} {res} of queue {r.queue} to be released")
    else:
        unblock.append(f"or lower the job's request: it asks for {amount(r.requested)} and the queue may hold "
                       f"{amount(r.limit_amount)}")
    summary = (f"queue {r.queue} {kind}: {amount(r.total)} {res} would exceed {amount(r.limit_amount)} "
               f"(short {amount(r.short)})")
    return _with(base, Gate.QUEUE_CAPABILITY, summary, numbers=tuple(numbers), unblock=tuple(unblock))


def _overcommit(base: Explanation, r: R.OvercommitLimit) -> Explanation:
    res = r.resource

    def amount(units: int) -> str:
        return show(res, units)

    numbers = (("cluster " + res, amount(r.cluster)), ("overcommit-factor", f"{r.factor:g}"),
               ("capacity", amount(r.capacity)), ("used", amount(r.used)), ("admitted", amount(r.admitted)),
               ("requested", amount(r.requested)), ("short", amount(r.short)))
    unblock = (f"wait for {amount(r.short)} {res} to be released in the cluster, add nodes, "
               f"or raise the overcommit plugin's overcommit-factor",)
    summary = f"cluster {res} overcommitted: {amount(r.total)} > {amount(r.capacity)} (short {amount(r.short)})"
    return _with(base, Gate.OVERCOMMIT, summary, numbers=numbers, unblock=unblock)


def _tasks(base: Explanation, r: R.TooFewTasks) -> Explanation:
    which = f"task {r.role}" if r.role else "the job"
    summary = f"{which} has {r.valid} live pods, fewer than its minimum {r.needed}"
    unblock = (f"look at {which}'s failed or deleted pods, or lower its minAvailable to {r.valid}",)
    return _with(base, Gate.GANG_TASKS, summary, numbers=(("valid", str(r.valid)), ("min", str(r.needed))),
                 unblock=unblock)


def _topology(base: Explanation, r: R.TopologyLimit | R.TopologyNoNode) -> Explanation:
    res, where = r.resource, r.domain
    need = show(res, r.needed)
    numbers = [("needs", f"{need} {res} inside one {where}"), ("highestTierAllowed", str(r.tier))]
    if isinstance(r, R.TopologyLimit):
        named = f" ({r.best_domain})" if r.best_domain else ""
        numbers.append((f"best {where} has free", f"{show(res, r.best)}{named}"))
        if r.usable < r.best:
            numbers.append(("of it on nodes that hold a task", show(res, r.usable)))
        if r.best >= r.needed:
            first = f"free {res} on single nodes of one {where} in pieces the tasks fit"
        else:
            first = f"free {show(res, r.needed - r.best)} more {res} inside one {where}"
        summary = f"no {where} can hold the gang: it needs {need} {res}, the best {where} has {show(res, r.best)} free"
    else:
        first = f"let the pods use nodes with {res}"
        summary = f"no node allows the gang's pods inside one {where}"
    unblock = (first, f"or allow a higher tier (networkTopology.highestTierAllowed > {r.tier}) or mode: soft")
    return _with(base, Gate.TOPOLOGY, summary, numbers=tuple(numbers), unblock=unblock)


def _shortfall(base: Explanation, found: Sequence[R.ResourceShortfall], head: R.GangNotReady | None) -> Explanation:
    numbers = list(_head(head))
    for r in found:
        numbers.append((r.resource, f"{r.tasks} more tasks need {show(r.resource, r.needed)}, "
                                    f"{show(r.resource, r.free)} free on the {r.nodes} nodes they may use, "
                                    f"short {show(r.resource, r.short)}"))
    shortages = ", ".join(f"{show(r.resource, r.short)} more {r.resource}" for r in found)
    unblock = [f"free {shortages} on nodes the gang may use"]
    if head is not None:
        unblock.append(f"or lower minAvailable (now {head.min_available})")
    short = ", ".join(f"{r.resource} {show(r.resource, r.short)}" for r in found)
    summary = f"gang short of {short}: the pods it still needs do not fit in what is free"
    return _with(base, Gate.GANG_SHORTFALL, summary, numbers=tuple(numbers), unblock=tuple(unblock))


def _fragmented(base: Explanation, r: R.Fragmented, head: R.GangNotReady | None) -> Explanation:
    needed = show_amounts(r.needed)
    numbers = (*_head(head), ("needs", needed), ("most free on one node", f"{show_amounts(r.largest)} ({r.node})"))
    summary = f"enough {needed} is free in total, but split across nodes"
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
    lines += [eviction_line(e) for e in ex.evictions]
    return "\n".join(lines)


def to_dict(ex: Explanation) -> dict[str, Any]:
    return {"target": ex.target, "phase": ex.phase, "queue": ex.queue, "gate": str(ex.gate),
            "summary": ex.summary, "numbers": dict(ex.numbers), "unblock": list(ex.unblock),
            "rank": list(ex.rank) if ex.rank else None, "published": ex.published,
            "reasons": [r.to_json() for r in ex.reasons],
            "evictions": [{"time": e.time, "side": "caused" if e.caused else "suffered", "pod": e.pod, "job": e.job,
                           "action": e.action, "by": e.by, "rule": e.rule, "breaksGang": e.breaks_gang}
                          for e in ex.evictions]}
