"""Layer `plugins`: DRA claims in the cycle — a helper of `predicates` (as `volume_binding`), served when the
predicates plugin's `predicate.DynamicResourceAllocationEnable` argument is true and the snapshot carries DRA
objects. No plugin of its own.

A pod with ResourceClaims may go only to nodes where every claim can be allocated (or, allocated already, is
reachable), on top of what other claims hold and what this session's placements took (`dra/allocator.py`): the
dynamic filter asks the session's tentative state; a Statement's placement takes the devices (`placed_task`),
taking a task back gives them back (`removed_task`), and a gang with a pod placed where its claims did not fit
(a gang placer's placement, which checks only the static predicates) is not ready. At close, the claims of the
pods a commit bound are handed to the adapter (`SessionAPI.bind_device_claims`), which writes their allocation
and `reservedFor` before the gang's pods are bound, as kube-scheduler's DynamicResources plugin does in PreBind
(Volcano: pkg/scheduler/plugins/predicates/predicates.go runs that plugin).

A claim from a template that the claim controller has not made yet cannot be written: such a pod waits
(`ClaimUnusable`), as kube-scheduler's pods wait for their claims. Reservations name the pod by its name; the
binder adds the pod's UID.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from scheduler.api import reasons as R, reasons_dra as D
from scheduler.api.decision import SUCCESS, Status, unresolvable, unschedulable
from scheduler.api.dra import ClaimWrite, DraObjects
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.messages_dra import render_dra
from scheduler.api.node import NodeInfo
from scheduler.api.reason_base import Reason
from scheduler.dra.allocator import Allocator, PodRef
from scheduler.dra.cel import Selectors
from scheduler.framework.plugin import SessionAPI

_SELECTORS = Selectors()  # compiled programs and per-device results outlive a session (devices change seldom)
# Reasons no eviction changes (a missing class, a selector that cannot be evaluated, refused admin access, a
# claim not made yet): the pod is unresolvable there; a shortfall of devices others hold is not.
_UNRESOLVABLE = (D.DeviceClassMissing, D.ClaimSelectorInvalid, D.AdminAccessRefused, D.ClaimMissing,
                 D.ClaimUnusable)


def _status(reason: Reason) -> Status:
    """The node's answer: a NodeFilter (what the session counts per node, `framework/fit.py`) whose detail is the
    typed reason's sentence without the node, then the typed reason itself."""
    anywhere: Any = replace(cast(Any, reason), node="") if hasattr(reason, "node") else reason
    node_filter = R.NodeFilter(R.DYNAMIC_RESOURCES, render_dra(anywhere) or reason.kind)
    if isinstance(reason, _UNRESOLVABLE):
        return unresolvable(node_filter, reason)
    return unschedulable(node_filter, reason)


def _ref(task: TaskInfo) -> PodRef:
    return PodRef(task.namespace, task.name, "")


class DeviceClaims:
    """The session's DRA allocations, and the dynamic filter that keeps to them."""

    def __init__(self, ssn: SessionAPI, dra: DraObjects, *, admin_access: bool = False) -> None:
        self.allocator = Allocator(dra.slices, dra.classes, dra.claims, dra.templates, admin_access=admin_access,
                                   selectors=_SELECTORS)
        self.trial = self.allocator.tentative()
        self.node_list = ssn.node_list
        self.position = ssn.arrays.position
        self.placed: dict[str, str] = {}  # task key -> its job
        self.broken: dict[str, set[str]] = {}  # job -> its placed tasks whose claims did not fit there

    # ---- the dynamic filter -------------------------------------------------------------------------------
    def filter(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        claims = task.device_claims
        if claims is None:
            return [SUCCESS] * len(nodes)
        for ref in claims.claims:
            if ref.template and not claims.claim_name(ref):
                waiting = _status(D.ClaimUnusable(
                    f"{task.namespace}/{task.name}:{ref.name}",
                    f"is not made yet from ResourceClaimTemplate {ref.template} (the claim controller makes it)"))
                return [waiting] * len(nodes)
        pod = _ref(task)
        out = []
        for node in nodes:
            reasons = self.trial.fits(pod, claims, node.name, node.labels)
            out.append(_status(reasons[0]) if reasons else SUCCESS)
        return out

    # ---- the session's event handler --------------------------------------------------------------------
    def placed_task(self, task: TaskInfo) -> None:
        """A Statement placed the task: its claims take their devices on its node."""
        claims = task.device_claims
        if claims is None or task.key in self.placed:
            return
        self.placed[task.key] = task.job
        index = self.position.get(task.node_name)
        labels = self.node_list[index].labels if index is not None else {}
        if index is None or self.trial.place(_ref(task), claims, task.node_name, labels):
            self.broken.setdefault(task.job, set()).add(task.key)

    def removed_task(self, task: TaskInfo) -> None:
        """A Statement took the task back: what only it held is given back."""
        job = self.placed.pop(task.key, None)
        if job is None:
            return
        self.trial.release(_ref(task))
        broken = self.broken.get(job)
        if broken is not None:
            broken.discard(task.key)
            if not broken:
                del self.broken[job]

    def ready(self, job: JobInfo) -> bool:
        """JobReady: no placed task of the job is left without its devices where it is."""
        return job.key not in self.broken

    # ---- at close ---------------------------------------------------------------------------------------
    def close(self, ssn: SessionAPI) -> None:
        """Hand the adapter the claim writes of the pods a commit bound, per gang, to write before the pods."""
        committed = {uid for uid, _ in ssn.committed_binds()}
        by_job: dict[str, list[ClaimWrite]] = {}
        for write in self.trial.plan():
            consumers = tuple(c for c in write.consumers if f"{write.namespace}/{c.name}" in committed)
            if not consumers:
                continue  # its pods were placed but not bound this cycle (pipelined): nothing to write yet
            job = self.placed[f"{write.namespace}/{consumers[0].name}"]
            by_job.setdefault(job, []).append(replace(write, consumers=consumers))
        for job, writes in by_job.items():
            ssn.bind_device_claims(job, writes)
