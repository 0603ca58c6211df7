"""Layer `api`: the one place sentences are made from reasons.

`render(reason)` says one reason for people (the numbers through `display_amount`, so 16 TiB reads `16Ti`);
`message(reasons)` joins several, as a PodGroup condition or an event carries them. The wording of Volcano's own
sentences ("3/8 tasks in gang unschedulable: ...", "Not enough valid tasks ...") and of kube-scheduler's node
filters ("0/5 nodes are unavailable: 3 Insufficient cpu") is kept, since people and tools know it. Nothing reads
these sentences back: tools read the reasons (`api/decision.py`, `publish`).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.api import reasons as R
from scheduler.api.decision import Status
from scheduler.api.field_parsers import describe as describe_field
from scheduler.api.job import Condition
from scheduler.api.messages_dra import render_dra
from scheduler.api.quota import show_quota
from scheduler.api.resources import display_amount


def message(reasons: Status | Iterable[R.Reason]) -> str:
    items = reasons.reasons if isinstance(reasons, Status) else reasons
    return "; ".join(render(r) for r in items)


UNSCHEDULABLE = "Unschedulable"  # the PodGroup condition type, and the reason of the events that repeat it


def unschedulable_condition(reason: str, status: Status) -> Condition:
    """The PodGroup's `Unschedulable` condition, its message rendered from `status` (enqueue's `NotEnqueued`,
    gang's `NotEnoughResources` and the like, the partial-gang policy's `PartialGangTimeout`)."""
    return Condition(UNSCHEDULABLE, "True", reason, message(status))


def show(resource: str, units: int) -> str:
    return display_amount(resource, units)


def show_amounts(amounts: R.Amounts) -> str:
    """`nvidia.com/gpu 3, memory 16Ti`."""
    return ", ".join(f"{name} {show(name, units)}" for name, units in amounts)


def render(reason: R.Reason) -> str:  # noqa: C901 - one case per kind, by design
    match reason:
        case R.QueueMissing(queue=queue):
            return f"queue {queue!r} does not exist"
        case R.QueueClosed(queue=queue, state=state):
            return f"queue {queue} is {state}: it admits no new jobs"
        case R.QueueNotLeaf(queue=queue, children=children):
            return f"queue {queue} has child queues ({', '.join(children)}): jobs go to leaf queues"
        case R.QueueParentMissing(at=at, parent=parent):
            return f"queue {at} names parent {parent!r}, and there is no Queue of that name"
        case R.QueueParentCycle(at=at, through=through):
            return f"queue {at}'s parents form a cycle through {through}"
        case R.QueueLimit():
            return _queue_limit(reason)
        case R.QueueOverused(queue=queue):
            return f"queue {queue} is overused: it holds its deserved share"
        case R.QueueShareExceeded(queue=queue, request=request):
            return f"queue {queue} cannot take {show_amounts(request) or 'nothing'} more without passing its share"
        case R.OvercommitLimit():
            return _overcommit(reason)
        case R.ResourceQuotaExceeded():
            return _quota(reason)
        case R.GangNotReady(unschedulable=n, tasks=total, ready=ready, min_available=minimum):
            return (f"{n}/{total} tasks in gang unschedulable: pod group is not ready, "
                    f"{ready} ready, {minimum} minAvailable")
        case R.TooFewTasks(role="", valid=valid, needed=needed):
            return f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {needed}"
        case R.TooFewTasks(role=role, valid=valid, needed=needed):
            return f"Not enough pods of task {role} for gang-scheduling, valid: {valid}, min: {needed}"
        case R.SchedulingGated(tasks=n, gate=gate):
            return f"{n} pending pods are scheduling-gated ({gate}): none is placed until its gates are removed"
        case R.RoleNotReady(role=role, ready=ready, needed=needed):
            return f"task {role}: {ready}/{needed} ready"
        case R.SubGroupsShort(policy=policy, have=have, needed=needed, live=True):
            return f"Not enough sub-groups of subGroupPolicy {policy} for gang-scheduling, valid: {have}, min: {needed}"
        case R.SubGroupsShort(policy=policy, have=have, needed=needed):
            return f"subGroupPolicy {policy}: {have}/{needed} sub-groups ready"
        case R.SubGroupNoDomain(group=group, tasks=tasks, tier=tier, domain=domain):
            return (f"sub-group {group} needs its {tasks} pending pods inside one {domain} (hard mode, "
                    f"highestTierAllowed {tier}); no {domain} the job may use holds them")
        case R.ResourceShortfall():
            return _shortfall(reason)
        case R.Fragmented(needed=needed, largest=largest, node=node):
            return (f"enough {show_amounts(needed)} is free in total but it is fragmented: "
                    f"the most on one node is {show_amounts(largest)} ({node})")
        case R.NotPipelined(min_available=minimum):
            return f"gang is not pipelined: fewer than {minimum} tasks placed, counting releasing resources"
        case R.Reserving(waited_seconds=waited, nodes=nodes, held=held, min_available=minimum, drained=drained):
            kept = f"; {drained} of its nodes keep their free resources for it" if drained else ""
            return (f"starving for {waited:g}s: reserving resources on {nodes} nodes as running pods free them "
                    f"({held} of {minimum} tasks held{kept})")
        case R.PlacementStale(task=task, node=node):
            return f"placement of {task} on {node} no longer fits"
        case R.PartialGangTimeout():
            return _partial(reason)
        case R.ScheduleTimeout():
            return _timeout(reason)
        case R.NodeFilter():
            return _node_filter(reason)
        case R.NodesUnavailable(total=total, counts=counts):
            ranked = sorted(((c.nodes, render(c.filter)) for c in counts), key=lambda nc: (-nc[0], nc[1]))
            return f"0/{total} nodes are unavailable: " + ", ".join(f"{n} {text}" for n, text in ranked)
        case R.TopologyLimit():
            return _topology(reason)
        case R.TopologyNoNode(tier=tier, domain=domain, resource=res, needed=needed):
            return (f"needs {show(res, needed)} {res} inside one {domain} (hard mode, highestTierAllowed {tier}); "
                    "no node allows them")
        case R.TopologyNoFit(tier=tier):
            return f"the gang's tasks fit no node (hard mode, highestTierAllowed {tier})"
        case R.FieldInvalid():
            return describe_field(reason)
        case R.MinRuntimeProtected():
            return _min_runtime(reason)
        case R.PluginError(plugin=plugin, action=action, error=error, detail=detail):
            return (f"plugin {plugin} failed in {action} on this job ({error}: {detail}); the job is left out of "
                    "this cycle, every other job goes on")
    return render_dra(reason) or reason.kind  # a new kind without a sentence yet still says what it is


def _queue_limit(r: R.QueueLimit) -> str:
    res = r.resource

    def amount(units: int) -> str:
        return show(res, units)

    if r.limit == R.DESERVED and (r.admitted or r.elastic):  # at admission (proportion's admitWithinShare)
        held = f"{amount(r.allocated)} allocated" + (f" - {amount(r.elastic)} elastic" if r.elastic else "")
        return (f"queue {r.queue} deserved share {res} {amount(r.limit_amount)}, with this job asking: {held} + "
                f"{amount(r.admitted)} admitted + {amount(r.requested)} requested = {amount(r.total)} > "
                f"{amount(r.limit_amount)} (short {res} {amount(r.short)})")
    if r.limit == R.DESERVED:
        return (f"queue {r.queue} cannot take {res} {amount(r.requested)} more without passing its deserved share: "
                f"{amount(r.allocated)} allocated + {amount(r.requested)} requested = {amount(r.total)} > "
                f"{amount(r.limit_amount)} (short {res} {amount(r.short)})")
    if r.limit == R.PARENT_CAPABILITY:
        return (f"queue {r.queue} real capability {res} {amount(r.limit_amount)} (its parent {r.parent}'s, less "
                f"what {r.parent}'s other children are guaranteed): {amount(r.total)} needed > it "
                f"(short {res} {amount(r.short)})")
    if r.limit == R.REAL_CAPABILITY:
        gate = (f"queue {r.queue} real capability {res} {amount(r.limit_amount)} (cluster {amount(r.cluster)} "
                f"less {amount(r.guaranteed_to_others)} guaranteed to other queues)")
    else:
        gate = f"queue {r.queue} capability {res} {amount(r.limit_amount)}"
    terms = f"{amount(r.allocated)} allocated"
    if r.elastic:
        terms += f" - {amount(r.elastic)} elastic"
    terms += f" + {amount(r.admitted)} admitted + {amount(r.requested)} requested"
    return f"{gate}: {terms} = {amount(r.total)} > {amount(r.limit_amount)} (short {res} {amount(r.short)})"


def _overcommit(r: R.OvercommitLimit) -> str:
    res = r.resource

    def amount(units: int) -> str:
        return show(res, units)

    return (f"cluster {res} {amount(r.cluster)} x overcommit-factor {r.factor:g} = {amount(r.capacity)}: "
            f"{amount(r.used)} used + {amount(r.admitted)} admitted + {amount(r.requested)} requested = "
            f"{amount(r.total)} > {amount(r.capacity)} (short {res} {amount(r.short)})")


def _quota(r: R.ResourceQuotaExceeded) -> str:
    """Volcano's lead words (pkg/scheduler/plugins/resourcequota/resourcequota.go), then the sum that fails."""
    res = r.resource

    def amount(nano: int) -> str:
        return show_quota(res, nano)

    return (f"resource quota insufficient: ResourceQuota {r.namespace}/{r.quota} {res} hard {amount(r.hard)}: "
            f"{amount(r.used)} used + {amount(r.enqueued)} enqueued this cycle + {amount(r.requested)} requested = "
            f"{amount(r.total)} > {amount(r.hard)} (short {res} {amount(r.short)})")


def _shortfall(r: R.ResourceShortfall) -> str:
    res = r.resource
    where = {R.NODES: f"the {r.nodes} nodes they may use have", R.CLUSTER: "the cluster has"}.get(
        r.scope, f"the {r.scope} has")
    who = f"{r.tasks} more tasks need" if r.tasks else "the gang needs"
    return (f"short {res} {show(res, r.short)}: {who} {res} {show(res, r.needed)}, "
            f"{where} {res} {show(res, r.free)} free")


_NODE_FILTERS = {  # kube-scheduler's wording (pkg/scheduler/framework/plugins/*/: ErrReason...)
    R.NODE_NOT_READY: "node(s) were not ready",
    R.NODE_UNSCHEDULABLE: "node(s) were unschedulable",
    R.NODE_AFFINITY: "node(s) didn't match Pod's node affinity/selector",
    R.NODE_PORTS: "node(s) didn't have free ports for the requested pod ports",
    # Volcano's words (pkg/scheduler/util/predicate_helper.go PredicateNodes, hard sharding mode)
    R.NODE_SHARD: "node isn't in scheduler node shard",
    # volumebinding/binder.go ErrReason..., volumezone/volume_zone.go ErrReasonConflict
    R.VOLUME_NODE_AFFINITY: "node(s) didn't match PersistentVolume's node affinity",
    R.VOLUME_BIND_CONFLICT: "node(s) didn't find available persistent volumes to bind",
    R.VOLUME_ZONE: "node(s) had no available volume zone",
    R.VOLUME_MISSING: "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",
    R.POD_AFFINITY: "node(s) didn't match pod affinity rules",
    R.POD_ANTI_AFFINITY: "node(s) didn't match pod anti-affinity rules",
    R.EXISTING_ANTI_AFFINITY: "node(s) didn't satisfy existing pods anti-affinity rules",
    R.TOPOLOGY_SPREAD: "node(s) didn't match pod topology spread constraints",
    R.TOPOLOGY_SPREAD_LABEL: "node(s) didn't match pod topology spread constraints (missing required label)",
    R.TOO_MANY_PODS: "Too many pods",
    R.NO_FEASIBLE_NODE: "no node passes predicates",
    R.SCORE_VETO: "node(s) were vetoed by a scorer (no device holds the request)",
}


# The claim a pod cannot use yet, in VolumeBinding's PreFilter wording (volumebinding/volume_binding.go).
_CLAIM_FILTERS = {
    R.VOLUME_UNBOUND_IMMEDIATE: 'pod has unbound immediate PersistentVolumeClaims ("{}")',
    R.VOLUME_CLAIM_MISSING: 'persistentvolumeclaim "{}" not found',
    R.VOLUME_CLAIM_DELETING: 'persistentvolumeclaim "{}" is being deleted',
    R.VOLUME_CLAIM_LOST: 'persistentvolumeclaim "{}" bound to non-existent persistentvolume',
}


def _node_filter(r: R.NodeFilter) -> str:
    if r.filter in _CLAIM_FILTERS:
        return _CLAIM_FILTERS[r.filter].format(r.detail)
    if r.filter == R.TAINT_TOLERATION:
        return f"node(s) had untolerated taint {{{r.detail}}}"
    if r.filter == R.INSUFFICIENT:
        return f"Insufficient {r.detail}"
    if r.filter == R.DYNAMIC_RESOURCES and r.detail:
        return f"node(s) cannot allocate the pod's ResourceClaims ({r.detail})"
    return _NODE_FILTERS.get(r.filter, r.filter)


def _topology(r: R.TopologyLimit) -> str:
    res, where = r.resource, r.domain
    head = f"needs {show(res, r.needed)} {res} inside one {where} (hard mode, highestTierAllowed {r.tier})"
    named = f" ({r.best_domain})" if r.best_domain else ""
    tail = f"the best {where}{named} has {show(res, r.best)} free"
    if r.best >= r.needed:
        tail += ", but not in pieces its tasks fit"
    if r.usable < r.best:
        tail += f" ({show(res, r.usable)} on nodes that hold one of its tasks)"
    return f"{head}; {tail}"


def _partial(r: R.PartialGangTimeout) -> str:
    head = (f"gang partly bound ({r.ready}/{r.min_available} pods) for more than {r.timeout_seconds:g}s "
            "and cannot be completed")
    if r.kept:
        return (f"{head}; {r.kept} bound pods have no controller to recreate them, so they were not evicted: "
                "delete them (or add pods so the gang fits) to let the gang schedule")
    return f"{head}: evicted {r.evicted} pods owned by a controller, which recreates them"


FALLBACK_ANNOTATION = "volcano-py.io/fallback-min-available"


def _min_runtime(r: R.MinRuntimeProtected) -> str:
    others = f" and {r.jobs - 1} more" if r.jobs > 1 else ""
    return (f"{r.jobs} running jobs not evicted: within their minimum runtime ({r.job}{others}; "
            f"{r.remaining_seconds:g}s left of {r.min_runtime_seconds:g}s, set by {r.source})")


def _timeout(r: R.ScheduleTimeout) -> str:
    head = f"gang not placed within scheduleTimeoutSeconds {r.timeout_seconds:g} (waited {r.waited_seconds:g}s)"
    if r.fallback:
        return f"{head}; retrying with minAvailable {r.fallback} of {r.min_available} ({FALLBACK_ANNOTATION})"
    return f"{head}; still waiting with minAvailable {r.min_available} (no smaller {FALLBACK_ANNOTATION})"
