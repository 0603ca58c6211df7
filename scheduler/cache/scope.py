"""Layer `cache`: with `--active-shards N`, which other schedulers' pods a replica keeps (`PodScope`).

A replica's sessions place pods only on the nodes of the shards it holds (cache/active.py `restrict`), so another
scheduler's pod bound to any other node is never read by a session of it: most pods of a large cluster are such
pods (at 8 replicas, seven in eight), and keeping them all (~1.9 KB each, stored, parsed and in the snapshot's
records) is what made a replica's memory the cluster's. The scope is the nodes every held shard's NodeShard desires
or uses; another scheduler's pod bound outside it is not kept (its event is read as far as its node, and a copy
the store held is dropped as if the pod were deleted). Our own pods, every replica's, are kept when read: gangs
and routes read them. Another scheduler's pending pod is not kept either: it holds no room on
any node (nothing a session reads), and the event that binds it in the scope is read then. Were it kept, the event
binding it outside the scope, passed over undecoded (`skips`), would leave it stored pending until its delete.

The rule that makes it safe: a node that joins the scope is `unlisted` (its other schedulers' pods may have been
dropped) until a list taken after it joined has put them in (cache/freshen.py, node by node, or every pod at once
when there are many or a shard was just taken); from joining on, the watch keeps its pods. An unlisted node is in
no session's nodes to place on (`ActiveShards.restrict`), so no session counts its room free with a pod missing.

Our own pods whose job another replica schedules are passed over the same way (`others`, set by cache/active.py
to `reads_light`): an added or modified pod of ours that is not bound in the scope, whose key the store does not
hold and whose job (its namespace and `scheduling.k8s.io/group-name`, read from the line) another replica schedules
is not decoded, and its job is noted in `passed` with the generation of lists it was passed over in. A job in
`passed` never enters a session until a list of its pods taken after its last pass has put them in (`listing` /
`listed`; `hold_back` from cache/active.py `restrict`, `list_wanting` from its `prepare`): that is how a job
whose route moves into a held shard other than by a takeover (its PodGroup's shard annotation changed) is read
whole before it is scheduled. What other replicas' jobs hold, which the holder of shard 0 once summed from every
pod, each holder now publishes for its own shards on the shard's Lease (cache/active_summary.py).

One active replica (no `--active-shards`) keeps every pod, as before: `Stores.pod_scope` is None.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Container, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Protocol

from scheduler.api.objects import MutableObj
from scheduler.api.shard import NodeShardInfo, ShardView

log = logging.getLogger("volcano_py.active")
PASSED_SAID_EVERY = 60.0  # seconds between two log lines counting the pod events passed over


class Shard(Protocol):
    """What `held_nodes` reads of a held shard's coordinator (cache/shards.py `ShardCoordinator`)."""

    name: str
    current: ShardView

    def view(self) -> Mapping[str, NodeShardInfo]: ...


class PodScope:
    def __init__(self, scheduler_names: Iterable[str],
                 drop: Callable[[PodScope, frozenset[str]], object] | None = None) -> None:
        self.names = frozenset(scheduler_names)
        self.drop = drop  # drops the pods no longer kept on nodes that left (cache/freshen.py `drop_pods`)
        # Swapped whole, read on the watch threads without the lock: the nodes whose pods are kept, and those of
        # them whose pods are not known to be all in the stores yet
        self.nodes: frozenset[str] = frozenset()
        self.unlisted: frozenset[str] = frozenset()
        self.dropped = 0  # pods not kept or dropped (logs, tests)
        self.skipped = 0  # watch events of pods not kept, not decoded (`skips`)
        # job -> another replica schedules it (cache/active.py `reads_light`); None: every pod of ours is decoded
        self.others: Callable[[str], bool] | None = None
        # job -> the list generation its last pod event passed over happened in; written on the watch thread, read
        # and pruned by the loop (a dict's single operations are atomic under the GIL)
        self.passed: dict[str, int] = {}
        self.generation = 0
        self.passed_ours = 0  # watch events of our pods passed over (logs, tests)
        self._pruned_at = 1024
        # Set by the CLI: one namespace's pods listed and put in (cache/freshen.py `freshen_pods`), for the jobs
        # `hold_back` held back (`wanting`), at the next `list_wanting`
        self.list_jobs: Callable[[str], bool] | None = None
        self.wanting: frozenset[str] = frozenset()
        self._said = (0, float("-inf"))  # (`passed_ours`, when) as last logged

    def keeps(self, obj: MutableObj) -> bool:
        """Whether the stores keep the pod: ours, bound in the scope, or not readable as a pod at all (kept: the
        parser says why it cannot be read)."""
        spec = obj.get("spec") if type(obj) is dict else None
        if type(spec) is not dict:
            return True
        node = spec.get("nodeName")
        if (node is not None and type(node) is not str) or (node and node in self.nodes):
            return True
        name = spec.get("schedulerName", "default-scheduler")
        return type(name) is str and name in self.names

    def skips(self, line: bytes, held: Container[str]) -> bool:
        """Whether a pod watch's event, undecoded, changes nothing in the stores, read without decoding it (`held`:
        the keys the pod store holds). Decoding a pod is most of what a watch event costs a replica (a real
        apiserver's pod, with its managedFields, is several KB), and at N replicas N-1 in N of another scheduler's
        pods are bound outside a replica's scope.

        An added or modified pod is skipped when the line holds exactly one member each named nodeName and
        schedulerName, without an escape, the node outside the scope and the scheduler not ours: one `keeps`
        refuses. In compact JSON a quote inside a string is escaped, so `"nodeName":"` is a member named nodeName;
        a label, annotation or nodeSelector key of that name makes two and the pod is decoded. Our pods are decoded
        (the apiserver sets spec.schedulerName on every pod) unless another replica schedules their job (`_passes`).
        A deleted pod is skipped when the store does
        not hold it, its key read the same way (one `"namespace":"`, and one `"metadata":{"name":"`: the apiserver
        writes a pod's name first in its metadata); one the store holds is decoded and goes."""
        if line.startswith(b'{"type":"DELETED",'):
            namespace = _only(line, b'"namespace":"')
            name = _only(line, b'"metadata":{"name":"') if namespace else None
            if not namespace or not name:
                return False
            try:
                return f"{namespace.decode()}/{name.decode()}" not in held
            except UnicodeDecodeError:
                return False
        if not line.startswith((b'{"type":"MODIFIED",', b'{"type":"ADDED",')):
            return False
        try:  # (each check ends the read as soon as it fails: a pod in the scope costs one look)
            node = _only(line, b'"nodeName":"')
            if node and node.decode() in self.nodes:
                return False
            scheduler = _only(line, b'"schedulerName":"')
            if scheduler is None:
                return False
            if scheduler.decode() not in self.names:
                return bool(node)  # another scheduler's pod bound outside the scope (a pending one is decoded)
            return self._passes(line, held)
        except UnicodeDecodeError:
            return False

    def _passes(self, line: bytes, held: Container[str]) -> bool:
        """A pod of ours not bound in the scope: passed over when the store does not hold it and another replica
        schedules its job (`others`); its job noted in `passed`. A pod of no group (no annotation), or whose key or
        group cannot be read exactly once, is decoded."""
        others = self.others
        if others is None:
            return False
        namespace = _only(line, b'"namespace":"')
        name = _only(line, b'"metadata":{"name":"') if namespace else None
        group = _only(line, b'"scheduling.k8s.io/group-name":"') if name else None
        if not group or not namespace or not name or len(group) > 253 or len(namespace) > 63:
            return False  # (a name past its bounds: decoded, and the parser names the field)
        space = namespace.decode()
        if f"{space}/{name.decode()}" in held:
            return False
        job = f"{space}/{group.decode()}"
        if not others(job):
            return False
        self.passed[job] = self.generation
        self.passed_ours += 1
        return True

    def listing(self) -> int:
        """Before a list of pods of ours that puts in every pod the store does not hold (cache/freshen.py): a new
        generation, so a pass over a job during the list is told apart from one before it. Returns the list's."""
        self.generation += 1
        return self.generation - 1

    def listed(self, token: int, jobs: Collection[str] | None = None) -> None:
        """A list started at `listing`'s `token` put its pods in: the jobs (every one when None) passed over no
        later than it are whole again."""
        for job, generation in list(self.passed.items()):
            if generation <= token and (jobs is None or job in jobs) and self.passed.get(job) == generation:
                self.passed.pop(job, None)

    def hold_back(self, jobs: MutableMapping[str, Any], now: float) -> None:
        """From `restrict`: the jobs of the session with pods passed over since their last list leave `jobs` for
        `wanting` (listed at the next `list_wanting`); the events passed over counted in a log line at most once a
        minute."""
        passed = self.passed  # (none passed over, the usual case: the session's thousands of jobs not walked)
        self.wanting = frozenset(key for key in jobs if key in passed) if passed else frozenset()
        for key in self.wanting:
            del jobs[key]
        if self.wanting:
            log.info("active shards: %d jobs had pods passed over while another replica scheduled them; listed "
                     "before they join a session", len(self.wanting))
        if self.passed_ours != self._said[0] and now - self._said[1] >= PASSED_SAID_EVERY:
            log.info("active shards: %d pod events of other replicas' jobs passed over undecoded (%d in all)",
                     self.passed_ours - self._said[0], self.passed_ours)
            self._said = (self.passed_ours, now)

    def list_wanting(self) -> None:
        """From `prepare`, before the snapshot: each namespace of the jobs held back listed (`list_jobs`); its jobs
        are whole again when its list succeeded (a fault is "not yet" for that namespace's jobs alone: they are
        held back again, the other namespaces' join)."""
        wanting, list_jobs = self.wanting, self.list_jobs
        if not wanting or list_jobs is None:
            return
        token = self.listing()
        by_namespace: dict[str, set[str]] = {}
        for key in wanting:
            by_namespace.setdefault(key.partition("/")[0], set()).add(key)
        for namespace, jobs in sorted(by_namespace.items()):
            try:
                listed = list_jobs(namespace)
            except Exception:
                log.exception("active shards: listing the pods of namespace %s (jobs passed over) failed; trying "
                              "next cycle", namespace)
                listed = False
            if listed:
                self.listed(token, jobs)
        self.wanting = frozenset()

    def prune(self, *live: Container[str]) -> None:
        """Forget jobs gone (in none of `live`: the snapshot's jobs, the stored PodGroups, as a job whose pods were
        all passed over lives on in its PodGroup) once `passed` has grown past what it held when last pruned."""
        if len(self.passed) > self._pruned_at:
            for job in [job for job in list(self.passed) if not any(job in jobs for jobs in live)]:
                self.passed.pop(job, None)
            self._pruned_at = 2 * len(self.passed) + 1024

    def step(self, nodes: frozenset[str], list_pods: Callable[[Sequence[str]], bool] | None,
             listed_all: bool = False) -> None:
        """From the loop, before a snapshot: the scope becomes `nodes` (those that joined are unlisted), then the
        unlisted ones are listed (`list_pods`: cache/freshen.py `freshener`); those whose list failed stay unlisted
        and are tried again at the next step. `listed_all`: every pod was just listed after the scope was last set
        (a shard taken: cache/freshen.py `freshen_pods`), which lists the nodes unlisted then."""
        if listed_all:
            self.unlisted = frozenset()
        joined = nodes - self.nodes
        if joined or nodes != self.nodes:
            log.info("active shards: other schedulers' pods kept on %d nodes (%d joined, %d left)", len(nodes),
                     len(joined), len(self.nodes - nodes))
        # The scope first, the list after: from now on the watch keeps their pods, and the list shows the rest
        left, self.nodes = self.nodes - nodes, nodes
        self.unlisted = (self.unlisted & nodes) | joined
        if left and self.drop is not None:  # their pods' memory now, not at their next event
            self.drop(self, left)
        if self.unlisted and list_pods is not None:
            pending = sorted(self.unlisted)
            if list_pods(pending):
                self.unlisted = self.unlisted - frozenset(pending)


def _only(line: bytes, member: bytes) -> bytes | None:
    """The string value of the one `member` (`"name":"`) in `line`; None when there is none or more than one, or
    when the value holds an escape."""
    at = line.find(member)
    if at < 0 or line.rfind(member) != at:
        return None
    start = at + len(member)
    end = line.find(b'"', start)
    if end < 0:
        return None
    value = line[start:end]
    return None if b"\\" in value else value


def held_nodes(coordinators: Iterable[Shard]) -> frozenset[str]:
    """The nodes each shard's NodeShard desires or uses (as the NodeShard watch has them now), and those its last
    step gave."""
    nodes: set[str] = set()
    for coordinator in coordinators:
        shard = coordinator.view().get(coordinator.name)
        nodes.update(coordinator.current.nodes, *((shard.desired, shard.in_use) if shard is not None else ()))
    return frozenset(nodes)
