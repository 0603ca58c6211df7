"""The controllers killed mid-sync (issue 31): SIGKILL `volcano-py controllers` while a Job's pods are created.

The controllers talk to the apiserver through the fault proxy (fault_proxy.py), which lets the first K pod
creates of the Job through and holds the others: the process is killed with some of its Job's pods created and
the creates of the others in flight. Those held creates are then released (a dead process's requests still in
transit land after it died), and the controllers are started again. Each test asserts that the kill struck
mid-sync (K creates answered, the rest not), then: the Job ends with exactly its N pods, each created once (no
pod deleted and made again, no extra pod), all Running, and the Job Running.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from chaos_helpers import TIMEOUT, Process, list_pods, make_nodes, start_scheduler
from controlplane import wait_for
from fault_proxy import Hold, Rule
from test_controller_faults import BATCH, alive_without_traceback, job_manifest, job_state, running_pods

N, K = 8, 3


@pytest.fixture
def world(control_plane, proxied, core_v1, new_namespace, tmp_path):
    proxy, kubeconfig = proxied
    proxy.clear()
    scheduler = start_scheduler(control_plane, tmp_path)
    tag = uuid.uuid4().hex[:6]
    nodes = make_nodes(core_v1, tag, 1)
    started: list[Process] = []

    def controllers(name: str) -> Process:
        proc = Process(control_plane, tmp_path, name, "controllers", "--no-leader-elect", kubeconfig=kubeconfig)
        started.append(proc)
        return proc

    try:
        yield proxy, controllers, new_namespace("ctl-killed"), tag
    finally:
        proxy.clear()
        for proc in started:
            proc.stop()
        scheduler.stop()
        for name in nodes:
            core_v1.delete_node(name)


@pytest.mark.parametrize("in_transit", ["lands-before-restart", "lands-late"])
def test_controllers_killed_while_a_jobs_pods_are_created_end_with_each_pod_once(world, core_v1, custom, in_transit):
    """`lands-before-restart`: the dead process's held creates reach the apiserver before the restart, which must
    find those pods made. `lands-late`: they stay held until the restarted process has made the missing pods
    itself, then reach the apiserver and are refused (409 AlreadyExists): no pod is made twice either way."""
    proxy, controllers, ns, tag = world
    creates = rf"^/api/v1/namespaces/{ns}/pods$"
    release = threading.Event()
    held = proxy.add(Rule("POST", creates, Hold(release, timeout=2 * TIMEOUT), skip=K, times=N - K))
    first = controllers("controllers")
    custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", job_manifest("train", tag, N))
    names = [f"train-worker-{i}" for i in range(N)]
    def answered() -> list[int]:
        return [s.status for s in proxy.requests("POST", creates)]

    try:
        wait_for(lambda: answered().count(201) == K and held.fired == N - K, TIMEOUT, interval=0.05,
                 what=f"{K} pod creates answered, the other {N - K} held")
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in list_pods(core_v1, ns)}
        first.kill()
        assert answered() == [201] * K, answered()  # struck mid-sync: K created, the others in flight
        assert len(before) == K
        if in_transit == "lands-before-restart":
            release.set()
            wait_for(lambda: len(answered()) == N, TIMEOUT, what="the held creates answered")
        second = controllers("controllers-restarted")
        wait_for(lambda: running_pods(core_v1, ns) == names, TIMEOUT, interval=0.2,
                 what=f"the job's {N} pods running")
    finally:
        release.set()
    wait_for(lambda: len(answered()) >= N + (N - K if in_transit == "lands-late" else 0), TIMEOUT,
             what="every create answered")
    wait_for(lambda: (job_state(custom, ns, "train").get("state") or {}).get("phase") == "Running", TIMEOUT,
             what="the job Running")
    pods = list_pods(core_v1, ns)
    assert sorted(p["metadata"]["name"] for p in pods) == names  # exactly N, none extra
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if p["metadata"]["name"] in before} == before
    statuses = answered()
    expected = {201: N} if in_transit == "lands-before-restart" else {201: N, 409: N - K}
    assert {s: statuses.count(s) for s in set(statuses)} == expected, statuses  # each pod created once
    assert running_pods(core_v1, ns) == names
    alive_without_traceback(second)
    print(f"\n{in_transit}: killed with {K}/{N} pods created and {N - K} creates held; creates answered {statuses}")
