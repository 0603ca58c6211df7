"""The scheduler run in-process against the test control plane, recording every cycle's result.

One place for what test_scheduler, test_controllers, test_plain_pods, test_ctl and test_topology need: a
ClusterCache + SchedulerLoop on a thread, optionally with a conf file, stopped cleanly at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scheduler.api.snapshot import CycleResult
from scheduler.cache.cluster_cache import ClusterCache
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
    control_plane, *, conf: str | None = None, conf_dir: Path | None = None, name: str = "volcano-py-scheduler"
) -> Iterator[RunningScheduler]:
    """Run the scheduler until the block ends; `conf` is the text of a volcano-scheduler.conf."""
    conf_path = None
    if conf is not None:
        assert conf_dir is not None, "a conf needs a directory to live in"
        conf_path = conf_dir / "volcano-scheduler.conf"
        conf_path.write_text(conf)
    api = control_plane.api_client(connection_pool_maxsize=32)
    cache = ClusterCache(api, {"volcano-py"}, "default", watch_timeout=20, request_timeout=15)
    loop = SchedulerLoop(cache, ConfWatcher(str(conf_path) if conf_path else None), period=0.2)
    running = RunningScheduler(loop, cache)
    apply = cache.apply

    def recording_apply(result: CycleResult) -> None:
        running.results.append(result)
        apply(result)

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
