"""Layer `cache`: our pending pods made current before a replica schedules a shard it has just taken
(`--active-shards`, cache/active.py).

A replica that takes over a dead replica's shard has seen that replica's binds only as far as its pod watch has
come. If the watch is further behind than the Lease's duration, the dead replica's last binds are not in the cache:
their pods look pending (each bind tried again is refused, so no pod is bound twice) and their nodes' room looks
free (which a full node could be over-committed on). So before the first session on a shard it has just taken, the
replica lists the pods the apiserver has pending now (one consistent list, selected by `spec.nodeName=`), and every
pod of ours the cache still holds pending that the list does not name is read again (a GET each) and put into the
cache as the watch would put it: bound where it was bound, or gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import TRANSPORT_ERRORS, Kube
from scheduler.cache.store import Stores, Watched

log = logging.getLogger("volcano_py.active")
PENDING_SELECTOR = "spec.nodeName="
LIST_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, TypeError, AttributeError)  # (no list of pods)


def freshen_pending(kube: Kube, stores: Stores, scheduler_names: Iterable[str],
                    on_event: Callable[[Watched, str, MutableObj], None], clock: Callable[[], float],
                    page_size: int = 500, pool: Executor | None = None) -> bool:
    """True when the cache's pending pods of ours are as current as a list taken now; False if the apiserver could
    not be read (the caller tries again next cycle). A pod read again bound is also assumed on its node (as our own
    binds are, `Stores.assumed`) until the watch shows it bound: a watch event older than the read cannot make it
    pending again meanwhile."""
    ours = frozenset(scheduler_names)
    try:
        listed = _listed(kube, stores.pods.path, page_size)
    except LIST_ERRORS as exc:
        log.warning("active shards: cannot list the pending pods before scheduling a shard taken over: %s", exc)
        return False
    with stores.lock:
        behind = [key for key, obj in stores.pods.objects.items()
                  if key not in listed and key not in stores.assumed and _pending_ours(obj, ours)]
    def read(key: str) -> tuple[str, object]:
        namespace, _, name = key.partition("/")
        return key, kube.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")

    # read in parallel on the API calls' pool when given: a survivor's watch can be thousands of binds behind
    reads = pool.map(read, behind) if pool is not None and len(behind) > 1 else map(read, behind)
    try:
        for key, obj in reads:
            if obj is not None and not isinstance(obj, dict):
                log.warning("active shards: pod %s read again is not an object; the next cycle tries again", key)
                return False
            if obj is None:
                with stores.lock:
                    gone = stores.pods.objects.get(key)
                if gone is not None:
                    on_event(stores.pods, "DELETED", gone)
                continue
            on_event(stores.pods, "MODIFIED", obj)
            node = (obj.get("spec") or {}).get("nodeName") if isinstance(obj.get("spec"), dict) else None
            if isinstance(node, str) and node:
                with stores.lock:
                    stores.assumed[key] = (node, clock())
    except TRANSPORT_ERRORS as exc:
        log.warning("active shards: cannot read a pod again before scheduling a shard taken over: %s", exc)
        return False
    if behind:
        log.info("active shards: %d pods the cache held pending were bound or gone: read again before scheduling a "
                 "shard taken over", len(behind))
    return True


def _listed(kube: Kube, path: str, page_size: int) -> set[str]:
    """The keys of the pods pending now: one consistent list, page by page."""
    keys: set[str] = set()
    token = ""
    while True:
        query = {"fieldSelector": PENDING_SELECTOR, "limit": page_size, **({"continue": token} if token else {})}
        page = kube.request("GET", path, query=query)
        items = page.get("items") or ()
        keys.update(_key(obj) for obj in items if isinstance(obj, dict))
        meta = page.get("metadata")
        token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
        if not token:
            return keys


def _key(obj: MutableObj) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _pending_ours(obj: MutableObj, ours: frozenset[str]) -> bool:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("nodeName"):
        return False
    name = spec.get("schedulerName", "default-scheduler")
    return type(name) is str and name in ours
