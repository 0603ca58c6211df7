"""Layer `cache`: removing Volcano's queue-allocation scheduling gate from the pods a cycle ungated
(`CycleResult.ungate`, with the feature gate SchedulingGatesQueueAdmission).

Volcano's scheduler sends a strategic merge patch deleting the gate by name, from background workers, to a pod
whose only gate it saw was that one (pkg/scheduler/gate/schedulinggate.go, pkg/scheduler/cache/util.go
RemoveVolcanoSchGate). volcano-py sends a JSON Patch that tests first, in the same request, that the pod is the
one the cycle decided for (its uid) and that its scheduling gates are exactly that one gate, then removes them:
the apiserver refuses it (422) if another gate is there, so the gate never goes while another remains, whatever
changed since the snapshot. Kubernetes only lets gates be removed after a pod's creation, never added.

Writes are sent only while this replica may write (the leader-election guard), on the cache's write pool,
retried by the client on a 429 or 5xx with Retry-After as every other write; a refused or failed one is logged
and left: the next cycle decides again from what the watch shows. The patched pod replaces the cached one, so
the next cycle sees it ungated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import quote

from urllib3.exceptions import HTTPError

from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.cache.kube import Kube, KubeError
from scheduler.cache.store import Stores, resource_version, trim

log = logging.getLogger("volcano_py.cache")

JSON_PATCH = "application/json-patch+json"


def ungate_patch(uid: str) -> list[dict[str, object]]:
    """The JSON Patch that removes the queue-allocation gate from the pod of that uid, only if it is the pod's
    only scheduling gate."""
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": QUEUE_ALLOCATION_GATE}]},
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]


class GateRemover:
    def __init__(self, kube: Kube, stores: Stores, pool: ThreadPoolExecutor, may_write: Callable[[], bool]):
        self.kube = kube
        self.stores = stores
        self.pool = pool
        self.may_write = may_write

    def submit(self, keys: list[str], uid_of: Callable[[str], str | None]) -> list[Future[None]]:
        """Start removing the gate of each pod (namespace/name) the cycle ungated; `uid_of` gives the uid of the
        pod the cycle saw under that key."""
        futures = []
        for key in keys:
            uid = uid_of(key)
            if uid is None:
                continue  # gone since the snapshot
            futures.append(self.pool.submit(self._remove, key, uid))
        return futures

    def _remove(self, key: str, uid: str) -> None:
        if not self.may_write():
            return
        namespace, name = key.split("/", 1)
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        try:
            updated = self.kube.request("PATCH", path, body=ungate_patch(uid), content_type=JSON_PATCH)
        except KubeError as exc:
            if exc.status in (404, 409, 422):  # gone, or no longer that pod or that one gate: decided again
                log.info("queue-allocation gate of pod %s left: %s", key, exc)
            else:
                log.warning("removing the queue-allocation gate of pod %s failed: %s", key, exc)
            return
        except (OSError, HTTPError) as exc:  # the connection: the next cycle decides again
            log.warning("removing the queue-allocation gate of pod %s failed: %s", key, exc)
            return
        log.info("removed the queue-allocation gate of pod %s", key)
        trim(updated)
        with self.stores.lock:
            current = self.stores.pods.objects.get(key)
            if current is not None and resource_version(updated) > resource_version(current):
                self.stores.pods.objects[key] = updated
