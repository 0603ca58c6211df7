"""volcano-py's components run against the test control plane, for the e2e tests.

One place for what test_scheduler, test_controllers, test_plain_pods, test_ctl and test_topology need: the
scheduler in-process (a ClusterCache + SchedulerLoop on a thread, recording every cycle's result, optionally
with a conf file) and the controllers as a `volcano-py controllers` process; both stopped cleanly at the end.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from controlplane import REPO_ROOT, create_gpu_node, delete_node_and_pods, node_is_ready, wait_for
from kubernetes import client

from scheduler.api.snapshot import CycleResult
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.kube import Kube
from scheduler.cache.pages import prefetch_ours
from scheduler.cache.runner import ConfWatcher, SchedulerLoop

TIMEOUT = 60


class RunningScheduler:
    def __init__(self, loop: SchedulerLoop, cache: ClusterCache) -> None:
        self.loop = loop
        self.cache = cache
        self.results: list[CycleResult] = []

    def bind_cycles(self, pod_keys: set[str]) -> list[int]:
        """Indexes of the cycles that bound any of these pods."""
        return [
            i
            for i, r in enumerate(self.results)
            if any(task in pod_keys for gang in r.binds for task, _ in gang.binds)
        ]


@contextmanager
def running_scheduler(
    control_plane, *, conf: str | None = None, conf_dir: Path | None = None, name: str = "volcano-py-scheduler",
    scheduler_names: tuple[str, ...] = ("volcano-py",), local_clock: Callable[[], float] = time.time,
    partial_gang_timeout: float = 60.0, queue_allocation_gate: bool = False, first_view: bool = False,
    pipeline: bool = False,
) -> Iterator[RunningScheduler]:
    """Run the scheduler until the block ends; `conf` is the text of a volcano-scheduler.conf; it serves pods
    that name one of `scheduler_names`. `local_clock` stands for the scheduler machine's clock (a skewed one, to
    test that timeouts run on the apiserver's). `queue_allocation_gate`: --feature-gates
    SchedulingGatesQueueAdmission=true. `pipeline`: --pipeline-apply."""
    conf_path = None
    if conf is not None:
        assert conf_dir is not None, "a conf needs a directory to live in"
        conf_path = conf_dir / "volcano-scheduler.conf"
        conf_path.write_text(conf)
    api = control_plane.api_client(connection_pool_maxsize=32)
    kube = Kube(api, request_timeout=15, local_clock=local_clock)
    # first_view: our pods listed at once, as `volcano-py scheduler` does, for the first cycle on a partial view
    ours = prefetch_ours(kube, scheduler_names) if first_view else None
    cache = ClusterCache(api, set(scheduler_names), "default", watch_timeout=20, request_timeout=15,
                         local_clock=local_clock, queue_allocation_gate=queue_allocation_gate, kube=kube,
                         ours_early=ours)
    loop = SchedulerLoop(cache, ConfWatcher(str(conf_path) if conf_path else None), period=0.2,
                         partial_gang_timeout=partial_gang_timeout, pipeline=pipeline)
    running = RunningScheduler(loop, cache)
    apply = cache.apply

    def recording_apply(result: CycleResult, **how: bool) -> None:
        running.results.append(result)
        apply(result, **how)

    cache.apply = recording_apply  # type: ignore[method-assign]
    thread = threading.Thread(target=loop.run, name=name, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        loop.stop()
        thread.join(TIMEOUT)
        cache.stop()
        api.close()
    assert not thread.is_alive(), "the scheduler loop did not stop"


@contextmanager
def kwok_nodes(core_v1, names: list[str], **node: object) -> Iterator[list[str]]:
    """kwok nodes (`create_gpu_node`'s keywords) for the block: Ready before it starts, deleted after it."""
    for name in names:
        create_gpu_node(core_v1, name, **node)
    try:
        for name in names:
            wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
        yield names
    finally:
        for name in names:
            delete_node_and_pods(core_v1, name)


# ---- the controllers, as a process -------------------------------------------------------------------------
class Controllers:
    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc, self.log = proc, log

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def start_controllers(control_plane, log: Path, *extra: str) -> Controllers:
    cmd = [sys.executable, "-m", "scheduler.cli", "controllers", "--kubeconfig", str(control_plane.kubeconfig),
           *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    return Controllers(proc, log)


def stop_controllers(ctl: Controllers) -> int:
    if ctl.proc.poll() is None:
        ctl.proc.terminate()
        try:
            ctl.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            ctl.proc.kill()
            ctl.proc.wait()
    return int(ctl.proc.returncode)


def queue_status(custom, name: str) -> dict:
    try:
        return custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name).get("status") or {}
    except client.ApiException as exc:
        if exc.status == 404:
            return {}
        raise


@contextmanager
def running_controllers(control_plane, custom, log_dir: Path, *extra: str) -> Iterator[Controllers]:
    """The controllers until the block ends; ready once they wrote the default queue's state (the scheduler
    creates that queue, so a scheduler must run too). They must exit 0 on SIGTERM."""
    ctl = start_controllers(control_plane, log_dir / "controllers.log", *extra)
    try:
        wait_for(lambda: ctl.proc.poll() is None and queue_status(custom, "default").get("state") == "Open",
                 TIMEOUT, what="controllers up (default queue Open)")
        yield ctl
    finally:
        code = stop_controllers(ctl)
        print(ctl.text()[-4000:])
    assert code == 0, ctl.text()[-4000:]
