"""The controllers' Job watch answered 410 Gone (issue 31): they relist, and a Job made meanwhile gets its pods.

As in test_watch_gone.py (the scheduler's cache), a control plane of its own runs kube-apiserver with
`--watch-cache=false`, so a watch is served by etcd and a compacted resourceVersion is really gone. The
controllers talk to it through the fault proxy (fault_proxy.py): their Job watch is cut inside an event, and the
reconnect, which resumes from the last resourceVersion they read, is held (a partition). Meanwhile a Job is
created and etcd is compacted past that resourceVersion. When the reconnect goes through it is answered 410
Gone; the controllers (kopf) must list the Jobs again and make the new Job's pods.
"""

from __future__ import annotations

import threading
import urllib.parse
import uuid

import pytest
from chaos_helpers import GROUP, TIMEOUT, Process, list_pods, make_nodes, start_scheduler
from controlplane import ControlPlane, wait_for
from fault_proxy import CutWatch, Hold, Rule, proxy_for
from test_controller_faults import BATCH, job_manifest
from test_watch_gone import etcd_compact

JOBS = rf"^/apis/{BATCH}/v1alpha1/jobs$"
WATCH = r"(^|&)watch=(1|true)(&|$)"


@pytest.fixture(scope="module")
def etcd_watches():
    """A small control plane whose watches go to etcd (no watch cache; kwok for the nodes, no controller manager).
    The Job controller makes a Job's pods once the scheduler admitted its PodGroup, so the scheduler runs too."""
    with ControlPlane(controller_manager=False, apiserver_args=("--watch-cache=false",)) as cp:
        yield cp


def pods_of(core_v1, namespace: str, job: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in list_pods(core_v1, namespace)
                  if p["metadata"]["name"].startswith(f"{job}-"))


def test_the_controllers_job_watch_answered_410_relists_and_a_job_made_in_the_gap_gets_its_pods(
        etcd_watches, tmp_path):
    from kubernetes import client

    cp = etcd_watches
    api = cp.api_client()
    core_v1, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    proxy, kubeconfig = proxy_for(cp, tmp_path)
    healed = threading.Event()
    controllers = scheduler = None
    try:
        scheduler = start_scheduler(cp, tmp_path)
        tag = uuid.uuid4().hex[:6]
        make_nodes(core_v1, tag, 1)
        cut = proxy.add(Rule("GET", JOBS, CutWatch(1), query=WATCH, times=1))
        held = proxy.add(Rule("GET", JOBS, Hold(healed, timeout=TIMEOUT), query=WATCH, times=1))
        ns = f"gone-{uuid.uuid4().hex[:6]}"
        core_v1.create_namespace({"metadata": {"name": ns}})
        try:
            custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
                "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                "spec": {"weight": 1, "reclaimable": True}})
        except client.ApiException as exc:
            assert exc.status == 409, exc
        controllers = Process(cp, tmp_path, "controllers", "controllers", "--no-leader-elect", kubeconfig=kubeconfig)
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("before", tag, 2))
        wait_for(lambda: pods_of(core_v1, ns, "before") == ["before-worker-0", "before-worker-1"], TIMEOUT,
                 interval=0.2, what="the first job's pods made")
        wait_for(lambda: proxy.cuts == 1 and held.fired == 1, TIMEOUT, interval=0.1,
                 what="the Job watch cut, its reconnect held")
        assert cut.fired == 1
        lists_before = [s for s in proxy.requests("GET", JOBS) if "watch=" not in s.query]

        custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("during", tag, 3))
        for i in range(3):  # more writes: the held watch's resourceVersion is then certainly compacted away
            core_v1.create_namespaced_config_map(ns, {"metadata": {"name": f"filler-{i}"}})
        revision = etcd_compact(cp.etcd_url)
        assert pods_of(core_v1, ns, "during") == []  # the fault held: the controllers have not seen the Job
        healed.set()

        def resumed_from() -> int | None:
            watches = [s for s in proxy.requests("GET", JOBS) if "watch=" in s.query]
            if len(watches) < 2:
                return None  # the held reconnect not answered yet
            rv = urllib.parse.parse_qs(watches[1].query).get("resourceVersion", [""])[0]
            return int(rv) if rv else -1

        stale = wait_for(resumed_from, TIMEOUT, what="the held reconnect forwarded")
        assert 0 < stale < revision, (stale, revision)  # it asked for a compacted revision: 410 Gone
        wait_for(lambda: pods_of(core_v1, ns, "during") == [f"during-worker-{i}" for i in range(3)], TIMEOUT,
                 interval=0.2, what="the job made during the gap gets its 3 pods")
        relists = [s for s in proxy.requests("GET", JOBS) if "watch=" not in s.query]
        assert len(relists) > len(lists_before), "the Jobs were not listed again after 410 Gone"
        assert pods_of(core_v1, ns, "before") == ["before-worker-0", "before-worker-1"]  # nothing made twice
        assert controllers.alive(), controllers.log()[-3000:]
        assert "Traceback (most recent call last)" not in controllers.log(), controllers.log()[-3000:]
        print(f"\nJob watch resumed from resourceVersion {stale}, etcd compacted at {revision}: "
              f"relisted {len(relists) - len(lists_before)}x; the job made during the gap got its pods")
    finally:
        healed.set()
        for proc in (controllers, scheduler):
            if proc is not None:
                proc.stop()
        proxy.__exit__()
        api.close()
