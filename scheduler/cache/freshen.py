"""Layer `cache`: the pods made current before a replica schedules a shard it has just taken (`--active-shards`,
cache/active.py).

A replica that takes a shard over has seen the other replicas' binds only as far as its pod watch has come. If
the watch is behind (the replica was stopped past its Lease and has just woken, or the machine is loaded), the last
binds on the shard's nodes are not in the cache: their pods look pending, or are not there at all (created and
bound while the watch was behind), and their nodes' room looks free, which a full node would be over-committed on.
A list of the pending pods only is not enough: a pod the cache never saw is not in it (bench-shards-chaos seed
3077: a replica SIGSTOPped past its Lease took its shard back on waking and bound a gang onto two nodes whose
room another replica had filled meanwhile with pods its cache had never seen).

So before the first session on a shard it has just taken, the replica lists every pod (one consistent list,
paged) and puts into the cache, as the watch would, each pod the cache does not hold or holds at an older
resourceVersion, and drops each pod the cache holds that the list does not, unless the cache's copy is newer than the
list (created or changed after it was taken: the watch has already shown it, and will not again). A pod put in
bound is also assumed on
its node (as our own binds are, `Stores.assumed`) until the watch shows it bound, so a watch event older than the
list cannot make it pending again meanwhile. One list at each take-over: it costs what a relist of the pods costs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from urllib.parse import quote

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube
from scheduler.cache.scope import PodScope
from scheduler.cache.store import Stores, Watched, resource_version

log = logging.getLogger("volcano_py.active")
LIST_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, TypeError, AttributeError)  # (no list of pods)


def freshen_pods(kube: Kube, stores: Stores, on_event: Callable[[Watched, str, MutableObj], None],
                 clock: Callable[[], float], page_size: int = 500, namespace: str | None = None) -> bool:
    """True when the cache's pods are as current as a list taken now; False if the apiserver could not be read (the
    caller tries again next cycle). Every pod counts, ours or another scheduler's: any of them fills a node.
    `namespace`: that namespace's pods only (a job whose pods were passed over, cache/scope.py)."""
    path = stores.pods.path if namespace is None else f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
    try:
        listed, candidates, at = _listed(kube, stores, page_size, path)
    except LIST_ERRORS as exc:
        log.warning("active shards: cannot list the pods%s before scheduling: %s",
                    "" if namespace is None else f" of namespace {namespace}", exc)
        return False
    with stores.lock:
        cached = {key: obj for key, obj in stores.pods.objects.items()
                  if namespace is None or key.startswith(f"{namespace}/")}
    behind = [obj for key, obj in candidates.items()
              if (was := cached.get(key)) is None or resource_version(was) < resource_version(obj)]
    # Gone: not listed, and the list was taken after the cache's copy (a list whose resourceVersion cannot be read
    # drops nothing: a pod it missed stays until the watch says it went)
    gone = [obj for key, obj in cached.items() if key not in listed and resource_version(obj) <= at]
    _put_in(stores, on_event, clock, behind)
    for obj in gone:
        on_event(stores.pods, "DELETED", obj)
    if namespace is None:
        stores.pods_listed_at = max(stores.pods_listed_at, at)
    if behind or gone:
        log.info("active shards: %d pods the cache held older or not at all, %d it held that are gone: made "
                 "current before scheduling %s", len(behind), len(gone),
                 "a shard taken over" if namespace is None else f"jobs of namespace {namespace}")
    return True


def freshen_nodes(kube: Kube, stores: Stores, on_event: Callable[[Watched, str, MutableObj], None],
                  clock: Callable[[], float], pool: Executor, names: Sequence[str]) -> bool:
    """The pods of the nodes `names` made current before a session uses them: nodes another shard has just let go
    of (cache/shards.py), whose last binds this replica's pod watch may not have delivered yet. One consistent list
    per node by the `spec.nodeName` field selector (the apiserver's watch cache indexes it), each pod the cache
    holds older or not at all put in as the watch would and assumed on its node, as `freshen_pods` does. A pod the
    list lacks is left to the watch (one counted too long fills a node, never over-commits it). False if any node
    could not be listed (the caller leaves those nodes out and tries again)."""
    futures = [pool.submit(kube.request, "GET", stores.pods.path, query={"fieldSelector": f"spec.nodeName={name}"})
               for name in names]
    try:
        pages = [future.result() for future in futures]
    except LIST_ERRORS as exc:
        log.warning("cannot list the pods of %d nodes this shard takes: leaving them out this cycle: %s",
                    len(names), exc)
        return False
    behind = []
    with stores.lock:
        held = stores.pods.objects
        for page in pages:
            for obj in page.get("items") or ():
                if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
                    was = held.get(_key(obj))
                    if was is None or resource_version(was) < resource_version(obj):
                        behind.append(obj)
    _put_in(stores, on_event, clock, behind)
    if behind:
        log.info("%d pods on %d nodes this shard takes were not in the cache yet: put in before using the nodes",
                 len(behind), len(names))
    return True


def drop_pods(stores: Stores, on_event: Callable[[Watched, str, MutableObj], None], scope: PodScope,
              nodes: frozenset[str]) -> int:
    """With `--active-shards`: the pods the stores hold on `nodes` (which left the scope) that the scope no longer
    keeps, dropped as the watch drops a deleted pod (cache/scope.py); how many."""
    with stores.lock:
        gone = [obj for obj in stores.pods.objects.values()  # (a node name that is not a string is no node here)
                if type(spec := obj.get("spec")) is dict and type(node := spec.get("nodeName")) is str
                and node in nodes and not scope.keeps(obj)]
    for obj in gone:
        on_event(stores.pods, "DELETED", obj)
    scope.dropped += len(gone)
    return len(gone)


NODE_LISTS_MAX = 256  # nodes listed one by one at most; past it, one list of every pod


def freshener(kube: Callable[[], Kube], stores: Stores, on_event: Callable[[Watched, str, MutableObj], None],
              clock: Callable[[], float], pool: Executor) -> Callable[[Sequence[str]], bool]:
    """What a shard's coordinator calls before a session uses nodes it has just been let have (cache/shards.py):
    their pods listed node by node, or every pod once when there are many. `kube`: the cache's client now."""
    def freshen(names: Sequence[str]) -> bool:
        if len(names) <= NODE_LISTS_MAX:
            return freshen_nodes(kube(), stores, on_event, clock, pool, names)
        return freshen_pods(kube(), stores, on_event, clock)
    return freshen


def _listed(kube: Kube, stores: Stores, page_size: int, path: str) -> tuple[set[str], dict[str, MutableObj], int]:
    """The keys of every pod, in one consistent list, page by page (each page's continue token holds the first
    page's resourceVersion); the listed pods the cache held older or not at all as each page came (checked again
    against the cache once the list is done); and the resourceVersion the list was read at (0 if unreadable). Only
    those pods are kept, not the list: a list of every pod, decoded, is several times what the cache holds of them."""
    keys: set[str] = set()
    candidates: dict[str, MutableObj] = {}
    token, at = "", None
    scope = stores.pod_scope  # (another scheduler's pod outside it is not kept: not a candidate, cache/scope.py)
    while True:
        query = {"limit": page_size, **({"continue": token} if token else {})}
        page = kube.request("GET", path, query=query)
        items = [(_key(obj), obj) for obj in page.get("items") or ()
                 if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict)
                 and (scope is None or scope.keeps(obj))]
        with stores.lock:
            held = stores.pods.objects
            for key, obj in items:
                keys.add(key)
                was = held.get(key)
                if was is None or resource_version(was) < resource_version(obj):
                    candidates[key] = obj
        meta = page.get("metadata")
        if at is None:
            at = resource_version(page)
        token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
        if not token:
            return keys, candidates, at


def _put_in(stores: Stores, on_event: Callable[[Watched, str, MutableObj], None], clock: Callable[[], float],
            pods: list[MutableObj]) -> None:
    """Each pod put in as the watch would, a bound one also assumed on its node (as our own binds are), so a watch
    event older than the list cannot make it pending again meanwhile."""
    scope = stores.pod_scope
    for obj in pods:
        if scope is not None and not scope.keeps(obj):
            continue
        on_event(stores.pods, "MODIFIED", obj)
        node = (obj.get("spec") or {}).get("nodeName") if isinstance(obj.get("spec"), dict) else None
        if isinstance(node, str) and node:
            with stores.lock:
                stores.assumed[_key(obj)] = (node, clock())


def _key(obj: MutableObj) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
