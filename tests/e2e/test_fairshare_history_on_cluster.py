"""Time-based fair share on the real apiserver: a queue's history, written by the scheduler into its Queue's
`volcano-py.io/usage` annotation, survives a scheduler restart and decides the contested room.

Two queues of weight 1 and 2 nodes x 4 GPUs (the only GPUs in the cluster). `proportion` with `usage.weight: 10`,
`usage.halfLife: 30s`, `usage.window: 10m` (docs/configuration.md).

1. Scheduler A runs with `heavy` busy: one job holds the 8 GPUs until A's own writer has recorded a usage
   fraction of at least 0.45 for `heavy` in its annotation (polled on the apiserver).
2. A stops; `heavy`'s pods go; each queue submits 8 one-GPU pods (before the next scheduler starts, so its first
   cycle sees both: no race on who is seen first). Scheduler B starts, a new process state that knows the history
   only from the annotation.
3. B's first cycle folds `heavy`'s record as read from the Queue (decayed, not started from zero), and `light`,
   with no history, takes most of the 8 GPUs (equal weights and no history would give 4 and 4).

The writer writes a queue's record once a minute (USAGE_WRITE_PERIOD); the test shortens that to 1 s so the busy
phase lasts seconds, not minutes: when, not what, is written. A and B run in this process, on this machine's clock,
the one the test reads: the record's `at` and the test's times need no slack.
"""

from __future__ import annotations

import json
import uuid

import pytest
from controlplane import GPU_RESOURCE, wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod

from scheduler.api.usage import USAGE_ANNOTATION, QueueUsage, decay, parse_usage
from scheduler.cache import status_writer

HALF_LIFE = 30.0
CONF = f"""actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
    arguments:
      usage.weight: 10
      usage.halfLife: {HALF_LIFE:g}s
      usage.window: 10m
  - name: nodeorder
"""
GPUS = 8
BUSY_SHARE = 0.45  # heavy's recorded usage fraction before the restart (holding the 8 GPUs about 26 s)


def podgroup(name: str, queue: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": 1, "queue": queue}}


def submit(core_v1, custom, namespace: str, tag: str, job: str, queue: str, pods: int) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(job, queue))
    for i in range(pods):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"{job}-{i}", job, tag, gpus=1))


def recorded(custom, queue: str) -> QueueUsage | None:
    """The usage record on the Queue object, as the apiserver serves it (None: none yet)."""
    obj = custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", queue)
    text = (obj["metadata"].get("annotations") or {}).get(USAGE_ANNOTATION)
    return parse_usage(text) if text else None


def cluster_gpus(core_v1) -> int:
    nodes = json.loads(core_v1.list_node(_preload_content=False).data)["items"]
    return sum(int((n["status"].get("allocatable") or {}).get(GPU_RESOURCE, "0")) for n in nodes)


def others_pending(core_v1, namespace: str) -> list[str]:
    """Pods of other tests still waiting for volcano-py (their namespaces being deleted): their queues would ask
    for shares too."""
    pods = json.loads(core_v1.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods
            if p["metadata"]["namespace"] != namespace and p["spec"].get("schedulerName") == "volcano-py"
            and not p["spec"].get("nodeName")]


def held(core_v1, namespace: str, job: str) -> int:
    return len([p for p in bound_pods(core_v1, namespace) if p.startswith(f"{job}-")])


@pytest.fixture
def two_queues(custom):
    names = {role: f"{role}-{uuid.uuid4().hex[:4]}" for role in ("heavy", "light")}
    for name in names.values():
        custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
            "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}})
    yield names
    for name in names.values():
        custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", name)


def test_the_queue_with_less_history_wins_the_contested_room_after_a_restart(
    control_plane, core_v1, custom, namespace, node_set, two_queues, tmp_path, monkeypatch
):
    monkeypatch.setattr(status_writer, "USAGE_WRITE_PERIOD", 1.0)
    for _ in range(2):
        node_set(gpus=4)
    tag = node_set.tag
    # proportion shares the whole cluster among the queues asking: the test's nodes must be all of its GPUs, and
    # its two queues the only ones asking (other tests' nodes and pods go when those tests end)
    wait_for(lambda: cluster_gpus(core_v1) == GPUS, TIMEOUT, what="the test's 8 GPUs the only ones in the cluster")
    wait_for(lambda: not others_pending(core_v1, namespace), TIMEOUT, what="no other test's pod waiting")
    heavy, light = two_queues["heavy"], two_queues["light"]

    # 1. heavy busy under scheduler A, until A has recorded enough of it
    submit(core_v1, custom, namespace, tag, "burn", heavy, GPUS)
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path):
        wait_for(lambda: held(core_v1, namespace, "burn") == GPUS, TIMEOUT, what="heavy holds the 8 GPUs")
        wait_for(lambda: (r := recorded(custom, heavy)) is not None and r.share >= BUSY_SHARE, TIMEOUT,
                 interval=0.2, what=f"heavy's usage fraction recorded >= {BUSY_SHARE}")
    before = recorded(custom, heavy)  # A's last write (it may have written once more while stopping)
    assert before is not None and before.half_life == HALF_LIFE and before.share >= BUSY_SHARE
    assert recorded(custom, light) is None  # light held nothing: no record

    # 2. the busy job goes; both queues ask for the whole cluster before B starts
    for i in range(GPUS):
        core_v1.delete_namespaced_pod(f"burn-{i}", namespace, grace_period_seconds=0)
    wait_for(lambda: not any(p.startswith("burn-") for p in bound_pods(core_v1, namespace)), TIMEOUT,
             what="heavy's busy pods gone")
    submit(core_v1, custom, namespace, tag, "late-heavy", heavy, GPUS)
    submit(core_v1, custom, namespace, tag, "late-light", light, GPUS)

    # 3. scheduler B: the history comes back from the annotation, and light wins the contested room
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as b:
        wait_for(lambda: held(core_v1, namespace, "late-light") >= 5, TIMEOUT,
                 what="light, with no history, holding at least 5 of the 8 GPUs (without history: 4)")
        first = next(q.usage for q in b.results[0].queues if q.queue == heavy)
        assert first is not None, "B's first cycle knows heavy's usage"
        # folded from A's record as the Queue carries it: decayed since its time, nothing held since
        expected = before.used[GPU_RESOURCE] * decay(first.at - before.at, HALF_LIFE)
        assert first.used[GPU_RESOURCE] == pytest.approx(expected, rel=1e-4)
        # the rule (weight fraction f = 1/2 each, f + k x (f - u)): light deserves at most this many GPUs, its
        # share only shrinking afterwards as heavy's usage decays
        w_heavy, w_light = max(0.005, 0.5 + 10 * (0.5 - first.share)), 0.5 + 10 * 0.5
        assert held(core_v1, namespace, "late-light") <= int(GPUS * w_light / (w_light + w_heavy) + 1e-9)
        # and B carries the record on in the annotation (its own writes continue A's, not a fresh start)
        after = wait_for(lambda: (r := recorded(custom, heavy)) is not None and r.at > before.at and r, TIMEOUT,
                         interval=0.2, what="B's first write of heavy's record")
        assert after.used[GPU_RESOURCE] >= before.used[GPU_RESOURCE] * decay(after.at - before.at, HALF_LIFE) \
            * (1 - 1e-5)
