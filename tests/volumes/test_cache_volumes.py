"""The Kubernetes adapter's side of volumes, against a fake apiserver: the watched PersistentVolumes, claims and
StorageClasses reach the snapshot (read again only when one changes, and not at all when the scheduler may not
list them), and a committed gang's claims are written before its pods' binds, as kube-scheduler's volume binder
writes them, with no pod bound when that fails."""

from __future__ import annotations

import copy
import threading
from typing import Any

from storage_objects import claim, storage_class, volume

from scheduler.api.snapshot import CycleResult, GangBind, VolumeBind
from scheduler.api.volumes import BOUND_BY_CONTROLLER, SELECTED_NODE
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import MERGE_PATCH, KubeError
from scheduler.cache.watch import Watcher
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.objects import node_object, pod_object

NOW = 1_700_000_000.0


class FakeApiserver:
    """Records every call; PATCHes of volumes and claims are applied to its copies (a merge patch of the keys the
    binder writes), or refused with `refuse` (an HTTP status) when set."""

    request_timeout = 30.0  # as Kube has it (the binder's fence reads it)

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        self.refuse: int | None = None
        self.lock = threading.Lock()

    def request(
        self, method: str, path: str, *, body: Any = None, content_type: str | None = None, **_: Any
    ) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, path, copy.deepcopy(body)))
        if method == "PATCH" and self.refuse is not None:
            raise KubeError(self.refuse, method, path, b'{"message": "the object has been modified"}')
        if method == "PATCH":
            assert content_type == MERGE_PATCH
            obj = self.objects[path]
            assert body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
            obj["metadata"].setdefault("annotations", {}).update(body["metadata"].get("annotations") or {})
            obj["spec"].update(body.get("spec") or {})
            obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
            return copy.deepcopy(obj)
        return {}


def cache_with(*storage: dict[str, Any], pods: list[dict[str, Any]] = ()) -> tuple[ClusterCache, FakeApiserver]:
    """A ClusterCache fed as its watches feed it, its storage kinds listed."""
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: NOW)
    server = FakeApiserver()
    cache.kube = server  # type: ignore[assignment]
    kinds = {
        "PersistentVolume": cache.stores.volumes,
        "PersistentVolumeClaim": cache.stores.claims,
        "StorageClass": cache.stores.storage_classes,
    }
    events = [(cache.queues, {"metadata": {"name": "default"}, "spec": {"weight": 1}})]
    events += [(cache.nodes, node_object(f"n{i}", cpu="8")) for i in range(3)]
    events += [(cache.pods, pod) for pod in pods]
    events += [(kinds[obj["kind"]], obj) for obj in storage]
    for i, (watched, obj) in enumerate(events):
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(10 + i)
        if obj.get("kind") == "PersistentVolumeClaim":
            obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
            server.objects[f"/api/v1/namespaces/default/persistentvolumeclaims/{obj['metadata']['name']}"] = obj
        if obj.get("kind") == "PersistentVolume":
            server.objects[f"/api/v1/persistentvolumes/{obj['metadata']['name']}"] = obj
        cache.watcher._on_event(watched, "ADDED", copy.deepcopy(obj))
    for watched in cache.stores.storage:
        watched.listed = True
    return cache, server


def test_the_snapshot_carries_the_watched_storage_and_a_claims_volume_decides_the_node() -> None:
    cache, _ = cache_with(
        storage_class("local"),
        volume("pv", node="n2"),
        claim("data", bound_to="pv"),
        pods=[pod_object("p", claims=["data"])],
    )
    snapshot = cache.snapshot()
    assert snapshot.storage is not None and set(snapshot.storage.claims) == {"default/data"}
    result = run_cycle(snapshot, builtin_default_conf())
    assert [gang.binds for gang in result.binds] == [(("default/p", "n2"),)]


def test_the_storage_is_read_again_only_when_a_storage_object_changed() -> None:
    cache, _ = cache_with(storage_class("local"), volume("pv"))
    first = cache.storage.storage()
    assert cache.storage.storage() is first
    cache.watcher._on_event(
        cache.stores.claims,
        "ADDED",
        {**claim("new"), "metadata": {"name": "new", "namespace": "default", "resourceVersion": "99"}},
    )
    second = cache.storage.storage()
    assert second is not first and second is not None and "default/new" in second.claims


def test_without_storage_listed_the_claims_are_not_considered() -> None:
    cache, _ = cache_with(pods=[pod_object("p", claims=["data"])])
    cache.stores.claims.listed = False  # e.g. the ClusterRole does not allow listing them
    snapshot = cache.snapshot()
    assert snapshot.storage is None
    assert run_cycle(snapshot, builtin_default_conf()).binds  # placed as before volumes were considered


def test_a_watch_the_scheduler_may_not_list_counts_as_synced_and_unlisted() -> None:
    cache = ClusterCache(None, {"volcano-py"}, "default")
    stop = threading.Event()

    class Forbidden:
        def request_bytes(self, method: str, path: str, **_: Any) -> bytes:
            raise KubeError(403, method, path, b'{"message": "forbidden"}')

    watcher = Watcher(Forbidden(), cache.stores, cache.parser, stop, watch_timeout=1, page_size=10)  # type: ignore[arg-type]
    thread = threading.Thread(target=watcher._run, args=(cache.stores.volumes,), daemon=True)
    thread.start()
    assert cache.stores.volumes.synced.wait(10.0)
    stop.set()
    thread.join(10.0)
    assert not cache.stores.volumes.listed and cache.storage.storage() is None


# ---- binding a gang's claims ---------------------------------------------------------------------------------


def gang(*volumes: VolumeBind) -> CycleResult:
    return CycleResult(binds=[GangBind("default/j", (("default/j-0", "n1"), ("default/j-1", "n1")), volumes)])


def test_a_static_volume_gets_the_claim_in_its_claim_ref_before_the_pods_are_bound() -> None:
    cache, server = cache_with(
        storage_class("local"), volume("pv", node="n1"), claim("data"), pods=[pod_object("j-0"), pod_object("j-1")]
    )
    failed = cache.binder.wait(cache.binder.submit(gang(VolumeBind("default/data", "n1", "pv")), NOW))
    assert failed == {}
    methods = [(m, p) for m, p, _ in server.calls]
    assert methods[0] == ("PATCH", "/api/v1/persistentvolumes/pv")
    assert sorted(methods[1:]) == [("POST", f"/api/v1/namespaces/default/pods/j-{i}/binding") for i in range(2)]
    body = server.calls[0][2]
    assert body["spec"]["claimRef"] == {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": "default",
        "name": "data",
        "uid": "uid-data",
        "resourceVersion": body["spec"]["claimRef"]["resourceVersion"],
    }
    assert body["metadata"]["annotations"] == {BOUND_BY_CONTROLLER: "yes"}
    stored = cache.stores.volumes.objects["pv"]  # the answer is kept: the next cycle sees the volume taken
    assert stored["spec"]["claimRef"]["name"] == "data"


def test_a_claim_to_provision_gets_the_selected_node() -> None:
    cache, server = cache_with(
        storage_class("csi", provisioner="csi.example.com"),
        claim("data", storage_class="csi"),
        pods=[pod_object("j-0"), pod_object("j-1")],
    )
    cache.binder.wait(cache.binder.submit(gang(VolumeBind("default/data", "n1")), NOW))
    method, path, body = server.calls[0]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/default/persistentvolumeclaims/data")
    assert body["metadata"]["annotations"] == {SELECTED_NODE: "n1"}


def test_a_refused_volume_write_binds_none_of_the_gangs_pods() -> None:
    """The volume changed since the decision (409): the gang waits for the next cycle, none of it bound."""
    cache, server = cache_with(
        storage_class("local"), volume("pv", node="n1"), claim("data"), pods=[pod_object("j-0"), pod_object("j-1")]
    )
    server.refuse = 409
    failed = cache.binder.wait(cache.binder.submit(gang(VolumeBind("default/data", "n1", "pv")), NOW))
    assert failed == {"default/j": 2}
    assert [m for m, _, _ in server.calls] == ["PATCH"]
    assert cache.stores.assumed == {}


def test_a_claim_bound_or_asked_for_already_is_not_written_again() -> None:
    cache, server = cache_with(
        storage_class("local"),
        volume("pv", node="n1", claim="default/data"),
        claim("data"),
        pods=[pod_object("j-0"), pod_object("j-1")],
    )
    cache.binder.wait(cache.binder.submit(gang(VolumeBind("default/data", "n1", "pv")), NOW))
    assert [m for m, _, _ in server.calls] == ["POST", "POST"]


def test_the_parse_cache_reads_a_pods_claims_also_when_it_skips_the_containers() -> None:
    """Pods of one request shape are parsed from a stub without their containers; the claims are in the volumes,
    which the stub keeps. A generic ephemeral volume's claim is `<pod>-<volume>`."""
    from scheduler.cache.parse import ParseCache

    parse = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
    first, second = pod_object("a", claims=["data"]), pod_object("b", claims=["data", "logs"])
    second["spec"]["volumes"].append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    second["spec"]["volumes"].append({"name": "config", "configMap": {"name": "c"}})
    for i, pod in enumerate((first, second)):
        pod["metadata"]["resourceVersion"] = str(i + 1)
    tasks = [parse.task(p, {}) for p in (first, second)]
    assert [t.claims if t else None for t in tasks] == [
        ("default/data",),
        ("default/b-scratch", "default/data", "default/logs"),
    ]
