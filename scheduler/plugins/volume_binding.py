"""Layer `plugins`: the claims a cycle binds — for each unbound `WaitForFirstConsumer` claim of a placed pod, the
PersistentVolume it takes, or dynamic provisioning on the pod's node. A helper of `predicates` (as `pod_counts`).

The rules are kube-scheduler's volume binder's (pkg/scheduler/framework/plugins/volumebinding/binder.go
`FindPodVolumes`, and component-helpers/storage/volume `FindMatchingVolume`): a claim already given a node
(`volume.kubernetes.io/selected-node`) is provisioned there and nowhere else; a volume pre-bound to the claim (its
claimRef) is the claim's, on the nodes its affinity admits; otherwise the smallest Available volume of the claim's
class that is unclaimed, large enough, of its volume mode, with every access mode it asks for, matching its
selector and admitting the node; failing that, the class must provision (a provisioner other than
`kubernetes.io/no-provisioner`) and its allowedTopologies admit the node. A pod's claims are matched smallest
request first, and one volume serves one claim.

What differs from kube-scheduler is that a gang is placed as a whole before anything is bound: the first placed
pod of a claim fixes the claim's choice for the session (`ClaimBinding.placed_task`, through the session's event
handler, undone if the gang's statement is discarded), so another pod of the same claim goes where that volume is
usable and never picks a second one, and a volume a claim took is free for no other claim. A pod that found no
usable choice where it was placed (a gang placer's placement, which checks only the static predicates) keeps its
gang from being ready (`ready`, at JobReady). At close, the claims of the pods a commit bound are handed to the
adapter (`SessionAPI.bind_volumes`), which binds them before the gang's pods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.api import reasons as R
from scheduler.api.decision import SUCCESS, Status, unresolvable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.snapshot import VolumeBind
from scheduler.api.volumes import Claim, Storage, Volume
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.pod_counts import BoolArray

BIND_CONFLICT = unresolvable(R.NodeFilter(R.VOLUME_BIND_CONFLICT))


@dataclass(frozen=True, slots=True)
class Choice:
    claim: str
    node: str  # where the first pod of the claim went: the node a provisioned volume is made for
    volume: str = ""  # the PersistentVolume; "": provisioned


class ClaimBinding:
    """The session's choices for the claims to bind, and the dynamic filter that keeps to them."""

    def __init__(self, ssn: SessionAPI, storage: Storage) -> None:
        self.storage = storage
        self.node_list = ssn.node_list
        self.position = ssn.arrays.position
        self.chosen: dict[str, Choice] = {}  # claim -> its choice this session
        self.users: dict[str, set[str]] = {}  # claim -> the placed tasks that hold its choice
        self.taken: set[str] = set()  # volumes chosen this session
        self.placed: dict[str, tuple[str, tuple[str, ...]]] = {}  # task uid -> (its job, the claims it holds)
        self.broken: dict[str, set[str]] = {}  # job uid -> its placed tasks whose claims found no choice there
        self._version = 0  # bumped when a choice is made or undone: the masks below are then recomputed
        self._masks: dict[str, tuple[int, BoolArray]] = {}  # claim -> (version, nodes its pods may use)
        self._fits: dict[str, BoolArray] = {}  # volume -> nodes its affinity admits
        self._free: dict[str, tuple[Volume, ...]] = {}  # claim -> unclaimed matching volumes, smallest first
        self._claimed: dict[str, Volume] | None = None  # claim -> the volume whose claimRef names it

    # ---- the dynamic filter -------------------------------------------------------------------------------
    def filter(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> list[Status]:
        needs = task.constraints.volumes
        if needs is None or not needs.to_bind:
            return [SUCCESS] * len(nodes)
        claims = self._by_size(needs.to_bind)
        allowed = self._mask(claims[0])
        for claim in claims[1:]:
            allowed = allowed & self._mask(claim)
        out = []
        for node in nodes:
            ok = bool(allowed[self.position[node.name]])
            if ok and len(claims) > 1:  # several claims on one node must not need the same volume
                ok = self._plan(claims, node) is not None
            out.append(SUCCESS if ok else BIND_CONFLICT)
        return out

    def _mask(self, key: str) -> BoolArray:
        """The nodes a pod may go to for this one claim, as the session's choices stand."""
        cached = self._masks.get(key)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        mask = self._claim_mask(key)
        self._masks[key] = (self._version, mask)
        return mask

    def _claim_mask(self, key: str) -> BoolArray:
        choice = self.chosen.get(key)
        if choice is not None:
            return self._fits_of(choice.volume) if choice.volume else self._only(choice.node)
        claim = self.storage.claims[key]
        if claim.selected_node:
            return self._only(claim.selected_node)
        mask = self._provisionable(claim)
        reserved = self._reserved(claim)
        if reserved is not None:
            return mask | self._fits_of(reserved.name)
        for volume in self._candidates(claim):
            if volume.name not in self.taken:
                mask = mask | self._fits_of(volume.name)
        return mask

    def _only(self, node: str) -> BoolArray:
        mask = np.zeros(len(self.node_list), dtype=bool)
        if node in self.position:
            mask[self.position[node]] = True
        return mask

    def _fits_of(self, name: str) -> BoolArray:
        mask = self._fits.get(name)
        if mask is None:
            volume = self.storage.volumes[name]
            if volume.node_terms is None:
                mask = np.ones(len(self.node_list), dtype=bool)
            else:
                mask = np.fromiter(
                    (volume.fits(n.labels) for n in self.node_list), dtype=bool, count=len(self.node_list)
                )
            self._fits[name] = mask
        return mask

    def _provisionable(self, claim: Claim) -> BoolArray:
        klass = self.storage.classes.get(claim.storage_class)
        if klass is None or not klass.provisions:
            return np.zeros(len(self.node_list), dtype=bool)
        return np.fromiter((klass.allows(n.labels) for n in self.node_list), dtype=bool, count=len(self.node_list))

    # ---- one pod's claims on one node -------------------------------------------------------------------
    def _plan(self, claims: Sequence[str], node: NodeInfo) -> list[Choice] | None:
        """A choice for each claim on this node (the session's where one was made), or None."""
        excluded: set[str] = set()
        plan = []
        for key in claims:
            done = self.chosen.get(key)
            if done is not None:
                if (
                    done.volume
                    and not self.storage.volumes[done.volume].fits(node.labels)
                    or (not done.volume and done.node != node.name)
                ):
                    return None
                plan.append(done)
                continue
            claim = self.storage.claims[key]
            if claim.selected_node:
                if claim.selected_node != node.name:
                    return None
                plan.append(Choice(key, node.name))
                continue
            volume = self._match(claim, node, excluded)
            if volume is not None:
                excluded.add(volume.name)
                plan.append(Choice(key, node.name, volume.name))
                continue
            klass = self.storage.classes.get(claim.storage_class)
            if klass is None or not klass.provisions or not klass.allows(node.labels):
                return None
            plan.append(Choice(key, node.name))
        return plan

    def _match(self, claim: Claim, node: NodeInfo, excluded: set[str]) -> Volume | None:
        reserved = self._reserved(claim)
        if reserved is not None:  # FindMatchingVolume returns it, or nothing when the node does not suit it
            return reserved if reserved.fits(node.labels) else None
        for volume in self._candidates(claim):
            if volume.name not in self.taken and volume.name not in excluded and volume.fits(node.labels):
                return volume
        return None

    def _reserved(self, claim: Claim) -> Volume | None:
        """A volume of the claim's class whose claimRef names the claim (pre-bound by a user, or by our bind of
        an earlier cycle that the PV controller has not completed yet)."""
        if self._claimed is None:
            self._claimed = {v.claim: v for v in self.storage.volumes.values() if v.claim}
        volume = self._claimed.get(claim.key)
        if volume is not None and volume.storage_class == claim.storage_class and volume.reserved_for(claim):
            return volume
        return None

    def _candidates(self, claim: Claim) -> tuple[Volume, ...]:
        found = self._free.get(claim.key)
        if found is None:
            found = self._free[claim.key] = tuple(
                sorted(
                    (v for v in self.storage.volumes.values() if _matches(claim, v)), key=lambda v: (v.capacity, v.name)
                )
            )
        return found

    def _by_size(self, claims: Sequence[str]) -> list[str]:
        """Smallest request first (binder.go `findMatchingVolumes` sorts so), then by name."""
        return sorted(claims, key=lambda k: (self.storage.claims[k].request, k))

    # ---- the session's event handler --------------------------------------------------------------------
    def placed_task(self, task: TaskInfo) -> None:
        """A Statement placed the task: its claims take their choices on its node (or keep the ones made)."""
        needs = task.constraints.volumes
        if needs is None or not needs.to_bind or task.key in self.placed:
            return
        index = self.position.get(task.node_name)
        plan = self._plan(self._by_size(needs.to_bind), self.node_list[index]) if index is not None else None
        if plan is None:
            self.broken.setdefault(task.job, set()).add(task.key)
            self.placed[task.key] = (task.job, ())
            return
        for choice in plan:
            if choice.claim not in self.chosen:
                self.chosen[choice.claim] = choice
                if choice.volume:
                    self.taken.add(choice.volume)
                self._version += 1
            self.users.setdefault(choice.claim, set()).add(task.key)
        self.placed[task.key] = (task.job, tuple(c.claim for c in plan))

    def removed_task(self, task: TaskInfo) -> None:
        """A Statement took the task back: a choice no placed task holds any more is undone."""
        entry = self.placed.pop(task.key, None)
        if entry is None:
            return
        job, claims = entry
        broken = self.broken.get(job)
        if broken is not None:
            broken.discard(task.key)
            if not broken:
                del self.broken[job]
        for claim in claims:
            users = self.users[claim]
            users.discard(task.key)
            if not users:
                del self.users[claim]
                choice = self.chosen.pop(claim)
                self.taken.discard(choice.volume)
                self._version += 1

    def ready(self, job: JobInfo) -> bool:
        """JobReady: no placed task of the job is left without volumes where it is."""
        return job.key not in self.broken

    # ---- at close ---------------------------------------------------------------------------------------
    def close(self, ssn: SessionAPI) -> None:
        """Hand the adapter the claims of the pods a commit bound, per gang, to bind before the pods."""
        by_job: dict[str, dict[VolumeBind, None]] = {}
        for task_uid, _ in ssn.committed_binds():
            job, claims = self.placed.get(task_uid, ("", ()))
            for claim in claims:
                choice = self.chosen[claim]
                by_job.setdefault(job, {})[VolumeBind(claim, choice.node, choice.volume)] = None
        for job, binds in by_job.items():
            ssn.bind_volumes(job, binds)


def _matches(claim: Claim, volume: Volume) -> bool:
    """An unclaimed volume the claim may take, whatever the node (FindMatchingVolume's checks but the node's)."""
    return (
        not volume.claim
        and volume.available
        and not volume.deleting
        and volume.storage_class == claim.storage_class
        and volume.capacity >= claim.request
        and volume.volume_mode == claim.volume_mode
        and claim.access_modes <= volume.access_modes
        and (claim.selector is None or claim.selector.matches(volume.labels))
    )
