"""Property, over seeded workloads in the simulator: the cluster never sits idle while a job it could run waits.

Per cycle (one `Tick` of the replay): the cluster is idle when no pod holds a GPU (so none is bound, running or
releasing: nothing will free room later). A job is runnable then when it had ADMISSION_CYCLES cycles of an idle
cluster to be admitted and get its pods (it arrived by then, and the cluster was idle through them), has not
started, asks for no more GPUs than its queue deserves in that cycle (proportion's share, which it never lets a
queue pass), and its queue's waiting jobs together ask no more
than the cluster holds (so `enqueue`, where an admitted gang counts against its queue's capability, admits them
all; otherwise the queue is skipped). Each pod of 1, 2, 4 or 8 GPUs fits an empty 8-GPU node. These queue limits
are Volcano's, kept as they are: a gang larger than its queue's share waits while the other queues ask (and so,
two queues each with such a gang can leave the cluster idle; that is not counted). An idle cluster
with a runnable job is a stall: every later cycle would see the same, as nothing runs to change it. The starvation
guard once made such stalls (tests/sim/test_starvation_guard_stall.py): a reservation that counted in its queue's
allocation and could never complete.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from gpu_days import NO_OVERCOMMIT, NODE_GPUS, gpu_cluster, gpu_job, replay_day

from scheduler.cycle import conf_from_text, load_conf_or_default
from scheduler.framework.conf import SchedulerConf
from scheduler.sim.replay import Replay

HORIZON = 20000
SEEDS = 16
# Cycles a job held by `enqueue` while the cluster was busy needs once it is idle: one to be admitted, one for the
# job controller to create its pods; a stall is a cluster idle through them with the job still waiting.
ADMISSION_CYCLES = 2
# volcano-py's default actions with a short guard threshold, so the guard acts often in a short day.
EAGER_GUARD = NO_OVERCOMMIT.replace("tiers:\n", "configurations:\n- name: allocate\n  arguments:\n"
                                    "    starvationThresholdSeconds: 60\ntiers:\n", 1)
# ... and holding the reserved nodes' idle room for the gang (`starvationHoldIdle`, actions/starvation.py 5.): the
# held GPUs sit idle while the nodes drain, never while nothing runs that could free them.
HOLDING_GUARD = EAGER_GUARD.replace("starvationThresholdSeconds: 60\n", "starvationThresholdSeconds: 60\n"
                                    "    starvationHoldIdle: 10m\n", 1)
CONFS = {"eager-guard": EAGER_GUARD, "holding-guard": HOLDING_GUARD}


def workload(seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """2-4 nodes of 8 GPUs, 2-3 queues of equal weight, 12-24 jobs: half of one pod of 1-4 GPUs, half gangs of
    4-8 GPU pods asking for a quarter to all of the cluster, so larger than a queue's share while the others ask."""
    rng = random.Random(seed)
    nodes, queues = rng.randint(2, 4), [f"q{i}" for i in range(rng.randint(2, 3))]
    total = nodes * NODE_GPUS
    jobs = []
    for i in range(rng.randint(12, 24)):
        if rng.random() < 0.5:
            gpus, pods = rng.choice([1, 2, 4]), 1
        else:
            gpus = rng.choice([4, 8])
            pods = rng.randint(max(2, total // 4 // gpus), total // gpus)
        jobs.append(gpu_job(f"j{i}", rng.choice(queues), rng.randrange(0, 3000, 5), rng.randint(100, 1500),
                            pods, gpus))
    return gpu_cluster(nodes, queues), jobs


def gpus_of(run: Any) -> tuple[int, int]:
    """(pods, GPUs per pod) of a generated job."""
    (task,) = run.item.manifest["spec"]["tasks"]
    return task["replicas"], task["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


def stalls(outcome: Replay, nodes: int) -> list[tuple[float, str]]:
    """(time, job) for each cycle that left the cluster idle with a runnable job (see the module doc)."""
    total = nodes * NODE_GPUS
    found = []
    ticks = outcome.ticks
    for index in range(ADMISSION_CYCLES, len(ticks)):
        before, tick = ticks[index - ADMISSION_CYCLES], ticks[index]
        if any(t.held > 0 for t in ticks[index - ADMISSION_CYCLES:index + 1]):
            continue
        deserved = {queue: share for queue, _, share in tick.queues if share is not None}
        waiting: dict[str, list[Any]] = {}
        for run in outcome.runs:
            if run.item.arrival <= before.time and (run.started is None or run.started > tick.time):
                waiting.setdefault(run.item.manifest["spec"]["queue"], []).append(run)
        for queue, runs in waiting.items():
            asked = sum(pods * gpus for pods, gpus in map(gpus_of, runs))
            if queue not in deserved or asked > total:
                continue  # `enqueue` may hold some: admitted gangs count against the queue's capability
            found += [(tick.time, run.key) for run in runs
                      if gpus_of(run)[0] * gpus_of(run)[1] <= deserved[queue] * total + 1e-9]
    return found


def run_day(tmp_path: Path, seed: int, conf: SchedulerConf) -> tuple[Replay, int]:
    cluster, jobs = workload(seed)
    return replay_day(tmp_path, cluster, jobs, conf, horizon=HORIZON, period=10), len(cluster["nodes"])


@pytest.mark.parametrize("seed", range(SEEDS))
@pytest.mark.parametrize("conf_name", ["default", *CONFS])
def test_the_cluster_never_idles_with_a_runnable_job(tmp_path: Path, seed: int, conf_name: str) -> None:
    conf = load_conf_or_default(None) if conf_name == "default" else conf_from_text(CONFS[conf_name])
    if conf_name == "holding-guard":
        assert conf.configurations["allocate"]["starvationHoldIdle"] == "10m"
    outcome, nodes = run_day(tmp_path, seed, conf)
    assert stalls(outcome, nodes) == []
