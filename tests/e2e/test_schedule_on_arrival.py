"""`--schedule-on-arrival` on a real cluster: with a schedule period of a minute, a pod created after a cycle is
bound within seconds (a cycle starts shortly after it arrives), not at the period's end."""

from __future__ import annotations

import time

from controlplane import free_port, wait_for
from processes import Process
from test_manifests import http_get, sample
from test_scheduler import bound_pods, gang_pod

PERIOD = 60.0  # seconds: far longer than an arrival's cycle may take
CYCLES = "volcano_e2e_scheduling_latency_milliseconds_count"


def cycles(base: str) -> float:
    status, text = http_get(f"{base}/metrics")
    return (sample(text, CYCLES) or 0.0) if status == 200 else 0.0


def test_a_pod_arriving_after_a_cycle_is_bound_within_seconds_not_at_the_periods_end(
        control_plane, core_v1, namespace, node_set, tmp_path):
    """Without the flag the next cycle is a period (a minute) after the first, so the pod would wait for it."""
    node_set(gpus=0)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    scheduler = Process(control_plane, tmp_path, "scheduler", "scheduler", f"--listen-address=127.0.0.1:{port}",
                        f"--schedule-period={PERIOD:.0f}s", "--schedule-on-arrival=100ms", "--leader-elect=false")
    try:
        wait_for(lambda: cycles(base) >= 1, 90, interval=0.2, what="the scheduler's first cycle")
        created = time.monotonic()
        pod = gang_pod("late", "unused", node_set.tag)
        pod["metadata"] = {"name": "late"}  # a plain pod: a gang of one
        core_v1.create_namespaced_pod(namespace, pod)
        wait_for(lambda: "late" in bound_pods(core_v1, namespace), PERIOD / 3, interval=0.1,
                 what="the late pod bound by a cycle on its arrival, long before the period ends")
        assert time.monotonic() - created < PERIOD / 3
    finally:
        assert scheduler.stop() == 0, scheduler.log()
