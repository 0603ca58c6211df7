"""kube-apiserver and etcd restarted (kill -9, then started again on the same port and data) under load.

8 nodes x 8 GPUs. The scheduler runs as a process. Wave 1 (6 gangs of 8 one-GPU pods) is bound; then, while
wave 2 (6 more gangs) is being created, the component is killed and restarted; then 3 gangs of wave 1 are
deleted. The scheduler's watches must resume (or relist after 410 Gone) and its cache converge: it sees the new
pods and the freed GPUs, so exactly 8 gangs end up bound, every gang whole or empty, no GPU double-booked
(`assert_no_overcommit`), and the scheduler process never died.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from chaos_helpers import (
    TIMEOUT,
    bound_pods,
    create_gangs,
    gang_counts,
    list_pods,
    make_nodes,
    partly_bound,
    retrying,
    scheduled_events_per_pod,
    start_scheduler,
    wait_no_pods_on,
)
from controlplane import assert_no_overcommit, wait_for

SIZE = 8


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_restart_under_load_loses_nothing_and_double_books_nothing(component, control_plane, core_v1, custom,
                                                                       new_namespace, tmp_path):
    tag = uuid.uuid4().hex[:6]
    nodes = make_nodes(core_v1, tag, 8)
    namespace = new_namespace(f"restart-{component}"[:20])
    wave1 = {f"a{i}": [f"a{i}-{j}" for j in range(SIZE)] for i in range(6)}
    wave2 = {f"b{i}": [f"b{i}-{j}" for j in range(SIZE)] for i in range(6)}
    gangs = {**wave1, **wave2}
    scheduler = start_scheduler(control_plane, tmp_path)
    try:
        create_gangs(core_v1, custom, namespace, tag, wave1)
        wait_for(lambda: len(bound_pods(core_v1, namespace)) == 48, TIMEOUT, interval=0.2, what="wave 1 bound")

        creating = threading.Thread(target=create_gangs, args=(core_v1, custom, namespace, tag, wave2), daemon=True)
        creating.start()
        # etcd comes back in a fraction of a second: keep it down 3s, so the apiserver's requests fail for real.
        down = control_plane.restart(component, kill=True, down_for=3.0 if component == "etcd" else 0.0)
        creating.join(TIMEOUT)
        assert not creating.is_alive()
        for gang in ("a0", "a1", "a2"):
            for name in wave1[gang]:
                retrying(lambda n=name: core_v1.delete_namespaced_pod(n, namespace, grace_period_seconds=0),
                         f"delete {name}")
        deleted = {n for g in ("a0", "a1", "a2") for n in wave1[g]}
        started = time.monotonic()

        def converged():
            bound = bound_pods(core_v1, namespace)
            counts = gang_counts(bound, {g: p for g, p in gangs.items() if g not in ("a0", "a1", "a2")})
            whole = [g for g, c in counts.items() if c == SIZE]
            return not partly_bound(counts, gangs) and len(whole) == 8 and not deleted & bound.keys() and counts

        counts = wait_for(converged, TIMEOUT, interval=0.2, what="8 whole gangs after the restart")
        settle = time.monotonic() - started
        names = {p["metadata"]["name"] for p in list_pods(core_v1, namespace)}
        assert names == {n for p in gangs.values() for n in p} - deleted, "pods were lost"
        twice = {k: v for k, v in scheduled_events_per_pod(core_v1, namespace).items() if v > 1}
        assert not twice, f"pods bound twice: {twice}"
        assert_no_overcommit(core_v1)
        assert scheduler.alive(), scheduler.log()[-3000:]
        log = scheduler.log()
        relists = log.count("relisting")
        outages = sum("cannot reach" in line for line in log.splitlines())  # one warning per outage (retry.py)
        print(f"\n{component} restart: unreachable {down:.1f}s; {outages} outage warnings, {relists} relists "
              f"(410 Gone); converged {settle:.1f}s after the deletes; {sum(c == SIZE for c in counts.values())} "
              "gangs whole, the rest empty")
    finally:
        scheduler.stop()
        retrying(lambda: core_v1.delete_namespace(namespace), "delete namespace")
        wait_no_pods_on(core_v1, nodes)
        for name in nodes:
            retrying(lambda n=name: core_v1.delete_node(n), f"delete node {name}")
