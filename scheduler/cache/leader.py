"""Layer `cache`: leader election on a `coordination.k8s.io/v1` Lease, so that two replicas never both schedule.

The rules are client-go's (`tools/leaderelection`):

- A candidate reads the Lease. If nobody holds it, or the holder's record has not changed for
  `lease_duration` *as observed on this candidate's own clock* (the time it last saw the record change, never
  the holder's `renewTime`, so clock skew between machines does not matter), it writes itself in as holder
  with the `resourceVersion` it read. The apiserver accepts only one of two such writes (409 Conflict for the
  other): optimistic concurrency is what makes the election safe.
- The holder renews (`renewTime`) every `retry_period`. It counts as leader only while its last successful
  renew is younger than `renew_deadline` (< `lease_duration`): a holder that cannot reach the apiserver stops
  scheduling `lease_duration - renew_deadline` before anybody else may take over.
- `leaseTransitions` counts changes of holder; `acquireTime` is when the current holder took it.
- On a clean shutdown the holder releases the Lease (empty holder, 1 s duration), so a standby takes over at
  its next retry instead of after the full lease duration.

`is_leader()` is cheap and checks the deadline itself, so the scheduling loop stops at once even when the
renewing thread is stuck in a slow request.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube, KubeError

log = logging.getLogger("volcano_py.leader")

LEASE_API = "/apis/coordination.k8s.io/v1"
# On every Binding a leader sends (the apiserver copies them onto the pod): the Lease it holds and its identity.
# manifests/07-bind-fence.yaml has the apiserver refuse a bind whose sender the Lease no longer names.
LEASE_ANNOTATION = "scheduling.volcano-py.io/lease"
BOUND_BY_ANNOTATION = "scheduling.volcano-py.io/bound-by"


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    namespace: str = "volcano-py-system"
    name: str = "volcano-py-scheduler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry period < renew deadline < lease duration, got "
                f"{self.retry_period}s, {self.renew_deadline}s, {self.lease_duration}s"
            )


def micro_time(t: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_seconds(value: object, default: float) -> float:
    """A Lease's `leaseDurationSeconds` as read: a whole number of seconds from 1 to 3600, else `default` (a hostile
    or hand-written Lease never stretches, shortens or breaks an election)."""
    return float(value) if type(value) is int and 0 < value <= 3600 else default


def _record(spec: MutableObj) -> tuple[Any, ...]:
    """What a candidate compares to see whether the holder is alive."""
    return (
        spec.get("holderIdentity"),
        spec.get("leaseDurationSeconds"),
        spec.get("renewTime"),
        spec.get("acquireTime"),
        spec.get("leaseTransitions"),
    )


class LeaderElector:
    """Acquires and renews the Lease in a background thread; `is_leader()` says whether to schedule now."""

    def __init__(
        self,
        kube: Kube,
        identity: str,
        config: LeaderConfig = LeaderConfig(),
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        on_change: Callable[[bool], None] | None = None,
    ):
        self.kube = kube
        self.identity = identity
        self.config = config
        self.monotonic = monotonic
        self.wall = wall
        self.on_change = on_change
        self.path = f"{LEASE_API}/namespaces/{config.namespace}/leases/{config.name}"
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0  # monotonic time the record last changed, as seen here
        self._renewed_at: float | None = None  # monotonic time of our last successful acquire/renew
        self._leading = False
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self.holder: str | None = None  # the holder as last observed
        self._duration = config.lease_duration  # the holder's leaseDurationSeconds, as last observed
        # Terms of ours: one more each time we take the Lease over (not a renew). A Lease lost and taken again
        # between two looks of a reader that only asks `is_leader` (a replica stopped past its Lease, its shard
        # taken by another and given back) is a new term, whatever `is_leader` said at those looks.
        self.terms = 0
        # What this replica publishes on the Lease with each acquire and renew (an annotation's value, or None for
        # none), and the value last read of it on the Lease, whoever wrote it (cache/active.py's shard summaries)
        self.publish: tuple[str, Callable[[], str | None]] | None = None
        self.published: str | None = None

    # ---- what the scheduling loop asks ---------------------------------------------------------------------
    def is_leader(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and self.monotonic() - renewed < self.config.renew_deadline

    def valid_for(self) -> float | None:
        """Seconds before any other candidate may take the Lease over: `lease_duration` after our last renew
        (a candidate counts it from when it saw that renew, which is no earlier), 0 when we hold nothing. The
        binder caps each bind's request to this, and sends none when too little is left (the fence)."""
        renewed = self._renewed_at
        if renewed is None or not self.is_leader():
            return 0.0
        return max(0.0, renewed + self.config.lease_duration - self.monotonic())

    def fence_annotations(self) -> dict[str, str]:
        """What each of our Bindings carries for the apiserver's bind fence (manifests/07-bind-fence.yaml)."""
        return {LEASE_ANNOTATION: f"{self.config.namespace}/{self.config.name}", BOUND_BY_ANNOTATION: self.identity}

    def wait_leader(self, timeout: float) -> bool:
        with self._changed:
            self._changed.wait_for(self.is_leader, timeout)
        return self.is_leader()

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.config.renew_deadline)
        if release and self.is_leader():
            self._release()
        self._set_leading(False)

    def _run(self) -> None:
        log.info("leader election: %s is a candidate for Lease %s/%s",
                 self.identity, self.config.namespace, self.config.name)
        while not self._stop.is_set():
            self.try_acquire_or_renew()
            leading = self.is_leader()
            if self._leading and not leading:
                log.error("leader election: lost the Lease (no renew within %.1fs): stopped scheduling",
                          self.config.renew_deadline)
            self._set_leading(leading)
            # Jitter the candidates' retries (client-go's JitterFactor 1.2) so they do not collide every time.
            wait = self.config.retry_period * (1.0 if leading else 1.0 + 0.2 * random.random())
            self._stop.wait(wait)

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            log.info("leader election: %s became the leader", self.identity)
        with self._changed:
            self._changed.notify_all()
        if self.on_change is not None:
            self.on_change(leading)

    # ---- one round ---------------------------------------------------------------------------------------
    def lapsed(self) -> bool:
        """As last observed, nobody holds the Lease: no holder, or the holder's record has not changed for its
        lease duration on our clock (an active-shards replica takes such a shard, `cache/active.py`)."""
        return not self.holder or self.monotonic() >= self._observed_at + self._duration

    def observe(self, spec: MutableObj, now_mono: float) -> None:
        """The Lease as a watch shows it, `now_mono` when it arrived (cache/active.py): its holder, and when its
        record last changed, as a GET in `try_acquire_or_renew` would have seen it, only sooner. A change is seen
        no earlier than it was written, so a lapse counted from it is never early; an event older than the last
        GET only makes the lapse later."""
        record = _record(spec)
        if record != self._observed:
            self._observed, self._observed_at = record, now_mono
        holder = spec.get("holderIdentity")
        self.holder = holder if isinstance(holder, str) and holder else None
        self._duration = lease_seconds(spec.get("leaseDurationSeconds"), self.config.lease_duration)

    def lapses_at(self) -> float | None:
        """When (monotonic, on our clock) another holder's Lease lapses as last observed: its record unchanged for
        its duration; None when nobody else holds it. A candidate waiting for a lapse looks again then, not at its
        next retry only (cache/active.py)."""
        if not self.holder or self.holder == self.identity:
            return None
        return self._observed_at + self._duration

    def try_acquire_or_renew(self, acquire: bool = True) -> bool:
        """One read-modify-write of the Lease; True if we hold it afterwards. With `acquire` False, a Lease we do
        not hold is only observed (its holder and when its record last changed), never taken."""
        now_mono, now = self.monotonic(), self.wall()
        try:
            lease = self.kube.request("GET", self.path, timeout=self._timeout())
        except KubeError as exc:
            if exc.status != 404:
                log.warning("leader election: cannot read the Lease: %s", exc)
                return False
            self.holder = None
            return self._create(now_mono, now) if acquire else False
        except TRANSPORT_ERRORS as exc:  # network trouble: not renewed this round
            log.warning("leader election: cannot read the Lease: %s", exc)
            return False
        spec = lease.get("spec") or {}
        self.read_published(lease)
        record = _record(spec)
        if record != self._observed:
            self._observed, self._observed_at = record, now_mono
        holder = spec.get("holderIdentity") or ""
        self.holder = holder or None
        duration = lease_seconds(spec.get("leaseDurationSeconds"), self.config.lease_duration)
        self._duration = duration
        if holder and holder != self.identity and now_mono < self._observed_at + duration:
            return False  # somebody else holds a live lease
        mine = holder == self.identity
        if not mine and not acquire:
            return False
        new_spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(round(self.config.lease_duration)),
            "acquireTime": spec.get("acquireTime") if mine and spec.get("acquireTime") else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine else 1),
        }
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {**_identity_meta(lease), "resourceVersion": (lease.get("metadata") or {}).get(
                "resourceVersion"), **self._annotations()},
            "spec": new_spec,
        }
        return self._write("PUT", self.path, body, now_mono, taking_over=not mine)

    def _annotations(self) -> MutableObj:
        """The metadata's annotations a write of ours carries: what `publish` gives now (none when it gives None or
        fails: a fault there must not cost the renewal)."""
        if self.publish is None:
            return {}
        key, value = self.publish
        try:
            text = value()
        except Exception:  # noqa: BLE001 - the Lease is renewed whatever the summary does
            log.exception("leader election: working out what to publish on the Lease failed; renewing without it")
            return {}
        return {"annotations": {key: text}} if text is not None else {}

    def read_published(self, lease: MutableObj) -> None:
        if self.publish is not None:
            meta = lease.get("metadata")
            annotations = meta.get("annotations") if isinstance(meta, dict) else None
            value = annotations.get(self.publish[0]) if isinstance(annotations, dict) else None
            self.published = value if isinstance(value, str) else None

    def _create(self, now_mono: float, now: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace, **self._annotations()},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(round(self.config.lease_duration)),
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
                "leaseTransitions": 0,
            },
        }
        return self._write("POST", f"{LEASE_API}/namespaces/{self.config.namespace}/leases", body, now_mono,
                           taking_over=True)

    def _write(self, method: str, path: str, body: MutableObj, now_mono: float, *, taking_over: bool) -> bool:
        try:
            written = self.kube.request(method, path, body=body, timeout=self._timeout())
        except KubeError as exc:
            if exc.status == 409:
                log.debug("leader election: lost the race for the Lease (409 Conflict)")
            else:
                log.warning("leader election: cannot write the Lease: %s", exc)
            return False
        except TRANSPORT_ERRORS as exc:
            log.warning("leader election: cannot write the Lease: %s", exc)
            return False
        # The clock starts when the write was *sent*: a slow response must not stretch our term.
        self._renewed_at = now_mono
        self._observed, self._observed_at = _record(written.get("spec") or {}), now_mono
        self.read_published(written)
        self.holder = self.identity
        if taking_over:
            self.terms += 1
            log.info("leader election: acquired Lease %s/%s (transitions %s)", self.config.namespace,
                     self.config.name, (written.get("spec") or {}).get("leaseTransitions"))
        return True

    def _release(self) -> None:
        """Give the Lease up so a standby takes over at its next retry (client-go's ReleaseOnCancel)."""
        try:
            lease = self.kube.request("GET", self.path, timeout=self._timeout())
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = micro_time(self.wall())
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {**_identity_meta(lease),
                             "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
                "spec": {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now,
                         "acquireTime": now},
            }
            self.kube.request("PUT", self.path, body=body, timeout=self._timeout())
            self._renewed_at = None
            log.info("leader election: released the Lease")
        except TRANSPORT_ERRORS as exc:  # the lease then simply expires
            log.warning("leader election: cannot release the Lease: %s", exc)

    def _timeout(self) -> float:
        # A request may not outlive the time we have left to renew.
        return max(0.5, min(self.kube.request_timeout, self.config.renew_deadline / 2))


def _identity_meta(lease: MutableObj) -> MutableObj:
    meta = lease.get("metadata") or {}
    return {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}


def ensure_namespace(kube: Kube, namespace: str, fallback: str = "default") -> str:
    """The namespace the Lease lives in: created if missing; `fallback` if we may not read or create it."""
    try:
        kube.request("GET", f"/api/v1/namespaces/{namespace}")
        return namespace
    except KubeError as exc:
        if exc.status not in (403, 404):
            raise
    try:
        kube.request("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": namespace}})
        log.info("created namespace %s for the leader-election Lease", namespace)
        return namespace
    except KubeError as exc:
        if exc.status == 409:
            return namespace
        log.warning("cannot create namespace %s (%s): the Lease goes to %s", namespace, exc, fallback)
        return fallback


def forget_member(kube: Kube, namespace: str, name: str, version: str) -> None:
    """Delete a replica's member Lease (cache/active.py: unchanged for many lease durations), only as it was read
    (`version`). Renewed meanwhile, or no right to delete: it stays, uncounted."""
    try:
        kube.delete(f"{LEASE_API}/namespaces/{namespace}/leases/{name}",
                    body={"preconditions": {"resourceVersion": version}} if version else None)
        log.info("active shards: deleted member Lease %s (its replica is gone)", name)
    except TRANSPORT_ERRORS as exc:
        log.debug("active shards: member Lease %s not deleted: %s", name, exc)
