"""Layer `cache`: a cycle's committed gangs, bound through the API (pods/binding), every pod concurrently.

A gang's claims to bind (`GangBind.volumes`) are bound first (`volumes.VolumeBinder`), then its DRA claims are
written (`GangBind.claims`, `dra_writer.ClaimWriter`); its pods' binds wait for that and are not sent if it
failed. A pod that carries bind annotations (deviceshare's cards) is annotated first,
as a device plugin reads them when the pod starts. A pod is *assumed* on its node from the moment its bind is
submitted until the watch shows it there, so a snapshot taken while the bind is in flight (the next cycle, with
`--pipeline-apply`) never double-books; a bind that fails drops the assumption, so its pod is pending again in the
cache and a later cycle retries it (Volcano's cache marks a task Binding the same way and sends the bind from a
worker: pkg/scheduler/cache/cache.go, AddBindTask and processBindTask).

A Binding names the UID of the pod the cycle decided for (as Volcano's do, pkg/scheduler/cache/cache.go), so a
pod deleted and recreated under the same name since is not bound in its place: the apiserver refuses (409). A
bind whose answer did not come back (a timeout, a dropped connection, a 5xx) may still have been carried out; the
pod is read again, and if it is bound where it was sent the bind counts as done, not failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from scheduler import metrics
from scheduler.api.snapshot import CycleResult, GangBind
from scheduler.api.timestamps import parse_time
from scheduler.cache.dra_writer import ClaimWriter
from scheduler.cache.events import EventRecorder
from scheduler.cache.kube import MERGE_PATCH, TRANSPORT_ERRORS, Kube, KubeError
from scheduler.cache.leader import BOUND_BY_ANNOTATION
from scheduler.cache.store import Stores
from scheduler.cache.volumes import VolumeBinder

log = logging.getLogger("volcano_py.cache")
GONE_LIMIT = 50_000  # pods remembered as gone at most, whatever the TTL: the memory stays bounded
GONE_TTL = 60.0  # seconds a pod answered 404 is not bound again (a list that predates its deletion is that old)

Pending = list[tuple[GangBind, Future[bool]]]
MIN_LEASE_LEFT = 1.0  # seconds: with less of the Lease certainly ours, a bind is not sent


class Binder:
    def __init__(
        self, kube: Kube, stores: Stores, pool: ThreadPoolExecutor, events: EventRecorder,
        may_write: Callable[[], bool], clock: Callable[[], float] = time.time,
        *, lease_left: Callable[[], float | None] = lambda: None,
    ):
        self.clock = clock
        self.lease_left = lease_left
        self.kube = kube
        self.stores = stores
        self.pool = pool
        self.events = events
        self.may_write = may_write
        self.volumes = VolumeBinder(kube, stores, may_write)
        self.device_claims = ClaimWriter(kube, stores, may_write)
        # With leader election: the Lease and our identity, on every Binding, for the apiserver's bind fence
        # (manifests/07-bind-fence.yaml), which refuses a bind sent after another replica took the Lease over.
        self.fence_annotations: dict[str, str] = {}
        # With --active-shards: the fence of the shard that owns the node (its Lease's annotations and how long it
        # is certainly ours), None for a node of no shard this replica holds (the bind is not sent).
        self.fence_for: Callable[[str], tuple[dict[str, str], Callable[[], float | None]] | None] | None = None
        # Pods (key, uid) the apiserver answered 404 for: gone, though a list fetched earlier may still show them
        # (the first cycle on a partial view decodes its full list after its binds); not bound again for GONE_TTL.
        self._gone: dict[tuple[str, str], float] = {}
        self._gone_lock = threading.Lock()  # its own: the bind threads' 404s never wait on the stores' lock

    def submit(self, result: CycleResult, now: float,
               uid_of: Callable[[str], str | None] = lambda _: None) -> Pending:
        """Start every bind of every committed gang; events wait until `wait` has seen them return (for
        cache/events.py's DEFER at most, from when each was queued). A gang's claims
        are bound by a task submitted before its pods' binds, which wait for it: the pool runs tasks in the order
        they were submitted, so a bind that waits never holds the worker its claims' task needs. `uid_of(pod key)`:
        the UID of the pod the cycle saw (its snapshot's)."""
        out = any(gang.binds for gang in result.binds)
        if out:  # events wait while these are out (two with the pipeline)
            self.events.binds_out()
        pending: Pending = []
        try:
            self.assume(((task, node) for gang in result.binds for task, node in gang.binds), now)
            for gang in result.binds:
                claims = self.pool.submit(self._prepare, gang) if gang.volumes or gang.claims else None
                pending.extend(
                    (gang, self.pool.submit(self.bind, task, node, now, result.annotations.get(task), claims,
                                            uid_of(task)))
                    for task, node in gang.binds
                )
        except BaseException:
            if out:  # nobody will wait for these: the events must not wait for them either
                self.events.binds_back()
            raise
        return pending

    def assume(self, binds: Iterable[tuple[str, str]], now: float) -> None:
        """Assume each pod on its node before its bind is sent: a snapshot taken meanwhile accounts it there. A pod
        the watch already shows bound is left as it is."""
        with self.stores.lock:
            pods, assumed = self.stores.pods.objects, self.stores.assumed
            for task, node in binds:
                pod = pods.get(task)
                if pod is None or not (pod.get("spec") or {}).get("nodeName"):
                    assumed[task] = (node, now)

    def _unassume(self, task_key: str, node: str, now: float) -> None:
        """The bind failed: its pod is pending again in the cache (unless a later bind assumed it since)."""
        with self.stores.lock:
            if self.stores.assumed.get(task_key) == (node, now):
                del self.stores.assumed[task_key]

    def _prepare(self, gang: GangBind) -> bool:
        """Before the gang's pods: its volumes' claims bound, then its DRA claims written."""
        if gang.volumes and not self.volumes.bind(gang):
            return False
        return not gang.claims or self.device_claims.write(gang)

    def wait(self, pending: Pending) -> dict[str, int]:
        """Failed binds by gang."""
        failed: dict[str, int] = {}
        try:
            for gang, future in pending:
                if not future.result():
                    failed[gang.job] = failed.get(gang.job, 0) + 1
        finally:
            if pending:
                self.events.binds_back()
        return failed

    def bind(self, task_key: str, node: str, now: float, annotations: Mapping[str, str] | None = None,
             claims: Future[bool] | None = None, uid: str | None = None) -> bool:
        """Bind one pod; True if it landed. Whatever the outcome short of that, the pod is not assumed any more."""
        landed = False
        try:
            landed = self._bind(task_key, node, now, annotations, claims, uid)
        finally:
            if not landed:
                self._unassume(task_key, node, now)
        return landed

    def _bind(self, task_key: str, node: str, now: float, annotations: Mapping[str, str] | None,
              claims: Future[bool] | None, uid: str | None) -> bool:
        if claims is not None and not claims.result():
            return False  # the gang's claims could not be bound: none of its pods is
        if not self.may_write():  # leadership lost while this cycle's binds were being sent
            log.warning("bind %s skipped: not the leader any more", task_key)
            return False
        fence, lease_left = self.fence_annotations, self.lease_left
        if self.fence_for is not None:
            owner = self.fence_for(node)
            if owner is None:
                log.warning("bind %s skipped: node %s is in no shard this replica holds", task_key, node)
                return False
            fence, lease_left = owner
        timeout = self._fenced_timeout(lease_left)
        if timeout is None:
            log.warning("bind %s skipped: the Lease may pass to another replica within %.1fs", task_key,
                        MIN_LEASE_LEFT)
            return False
        if uid and (task_key, uid) in self._gone:
            log.debug("bind %s skipped: the apiserver said this pod is gone", task_key)
            return False
        namespace, name = task_key.split("/", 1)
        prebind_started = time.monotonic()
        if annotations and not self._annotate(namespace, name, annotations):
            return False
        bind_started = time.monotonic()
        meta: dict[str, object] = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
        if fence:
            meta["annotations"] = dict(fence)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body,
                              timeout=timeout, protobuf=True)
        except TRANSPORT_ERRORS as exc:  # the pod stays pending, retried next cycle
            if isinstance(exc, KubeError) and exc.status == 404:
                log.info("pod %s was deleted before its bind: dropped", task_key)
                if uid:
                    self._forget_gone(task_key, uid, time.monotonic())
                return False
            if (isinstance(exc, KubeError) and exc.status < 500) or not self._landed(namespace, name, node, uid):
                log.warning("bind %s -> %s failed: %s", task_key, node, exc)
                return False
            log.info("bind %s -> %s: no answer (%s), but the pod is bound there", task_key, node, exc)
        with self.stores.lock:
            pod = self.stores.pods.objects.get(task_key)
            # Assumed until the watch shows it bound; also a pod not listed yet (a bind of the first cycle on a
            # partial view, cache/first_view.py): the full list may predate the bind. A pod that never shows
            # up is forgotten at the next snapshot (Stores.expire_assumed).
            if pod is None or not (pod.get("spec") or {}).get("nodeName"):
                self.stores.assumed[task_key] = (node, now)
        created = parse_time(((pod or {}).get("metadata") or {}).get("creationTimestamp"))
        metrics.observe_bind(time.monotonic() - bind_started, self.clock() - created if created else None,
                             bind_started - prebind_started if annotations else None)
        self.events.record("Pod", task_key, "Normal", "Scheduled", f"Successfully assigned {task_key} to {node}")
        return True

    def _forget_gone(self, task_key: str, uid: str, now: float) -> None:
        """Remember the pod as gone for GONE_TTL seconds (monotonic `now`), at most GONE_LIMIT pods. The dict is in
        the order the pods were added, oldest first, so what expired is dropped from its front: a burst of 404s
        (a namespace deleted under a cycle's binds) costs each one O(1), not a scan of all the others."""
        with self._gone_lock:
            self._gone.pop((task_key, uid), None)  # re-added at the end: the order stays oldest first
            self._gone[(task_key, uid)] = now
            while self._gone:
                oldest = next(iter(self._gone))
                if now - self._gone[oldest] <= GONE_TTL and len(self._gone) <= GONE_LIMIT:
                    break
                del self._gone[oldest]

    def _landed(self, namespace: str, name: str, node: str, uid: str | None) -> bool:
        """Whether a bind that got no answer was carried out: the pod (the same one) is bound to `node`."""
        try:
            pod = self.kube.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except TRANSPORT_ERRORS:  # still unreachable: the bind counts as failed, the next cycle sees
            return False
        meta, spec = (pod or {}).get("metadata") or {}, (pod or {}).get("spec") or {}
        # With the fence on, the bind names its sender (copied onto the pod): a standby that took over and bound
        # the pod to the same node did not carry out this bind.
        sender = self.fence_annotations.get(BOUND_BY_ANNOTATION)
        if sender is not None and (meta.get("annotations") or {}).get(BOUND_BY_ANNOTATION) != sender:
            return False
        return spec.get("nodeName") == node and (uid is None or meta.get("uid") == uid)

    def _fenced_timeout(self, lease_left: Callable[[], float | None] | None = None) -> float | None:
        """The bind request's timeout: no longer than the Lease is certainly ours, so a leader frozen past it (a
        SIGSTOP, a long GC pause) cannot have a bind still in flight when a standby takes over; None when less
        than MIN_LEASE_LEFT is left (the bind is not sent; the pod stays pending for the next leader)."""
        left = (lease_left or self.lease_left)()
        if left is None:
            return self.kube.request_timeout
        if left < MIN_LEASE_LEFT:
            return None
        return min(self.kube.request_timeout, left)

    def _annotate(self, namespace: str, name: str, annotations: Mapping[str, str]) -> bool:
        """Write the pod's bind annotations (deviceshare's cards) first: a device plugin reads them at start."""
        try:
            self.kube.request(
                "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}",
                body={"metadata": {"annotations": dict(annotations)}}, content_type=MERGE_PATCH,
            )
        except TRANSPORT_ERRORS as exc:  # the pod stays pending and is retried next cycle
            log.warning("annotating %s/%s before its bind failed: %s", namespace, name, exc)
            return False
        return True
