"""Time-based fair share on a real cluster: proportion with `usage.weight` reads each Queue's usage history from
its `volcano-py.io/usage` annotation, so a queue that used the cluster recently yields to one that did not, and
the history the scheduler writes there survives a restart of the scheduler."""

from __future__ import annotations

import json
import math
import time

from controlplane import wait_for
from inprocess import running_scheduler
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, unschedulable

from scheduler.api.usage import USAGE_ANNOTATION, parse_usage

GPU = "nvidia.com/gpu"
HALF_LIFE, WINDOW = 3600.0, 86400.0
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
    arguments:
      usage.weight: 1
      usage.halfLife: 1h
      usage.window: 24h
"""


def queue(name: str, annotations: dict[str, str] | None = None) -> dict:
    meta: dict = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": meta, "spec": {"weight": 1}}


def podgroup(name: str, queue_name: str) -> dict:
    return {"apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"minMember": 1, "queue": queue_name}}


def heavy_history(now: float) -> str:
    """A record, folded just now, of a queue that held 64 GPUs for the last ten hours (as the rule sums it)."""
    used = 64 * HALF_LIFE / math.log(2) * (1 - 2 ** (-10 * 3600 / HALF_LIFE))
    return json.dumps({"v": 1, "at": now, "halfLife": HALF_LIFE, "window": WINDOW, "used": {GPU: used}})


def usage_annotation(custom, name: str) -> str | None:
    obj = custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", name)
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(USAGE_ANNOTATION)


def test_the_queue_without_recent_usage_gets_the_gpus_first(control_plane, tmp_path, core_v1, custom, namespace,
                                                            node_set):
    node_set(gpus=4)
    tag = node_set.tag
    # Equal weights; "a-" sorts first, so without history the heavy queue's job would go first.
    heavy, light = f"a-heavy-{tag}", f"b-light-{tag}"
    made = [queue(heavy, {USAGE_ANNOTATION: heavy_history(time.time())}), queue(light)]
    for q in made:
        custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", q)
    try:
        with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as scheduler:
            wait_for(lambda: {heavy, light} <= set(scheduler.cache.queues.objects), TIMEOUT,
                     what="the cache sees the queues")
            for group, q in (("heavy", heavy), ("light", light)):
                custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(group, q))
                core_v1.create_namespaced_pod(namespace, gang_pod(f"{group}-0", group, tag, gpus=3))
            wait_for(lambda: "light-0" in bound_pods(core_v1, namespace), TIMEOUT,
                     what="the light queue's 3 GPUs bound (each queue deserves 2 of 4 without history)")
            wait_for(lambda: unschedulable(custom, namespace, "heavy"), TIMEOUT, what="the heavy queue's job held")
            assert "heavy-0" not in bound_pods(core_v1, namespace)
            written = parse_usage(usage_annotation(custom, heavy))
            assert written.used[GPU] > 0  # the history is still there (rewritten at most once a minute)
    finally:
        for q in made:
            custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", q["metadata"]["name"])


def test_the_history_the_scheduler_writes_survives_its_restart(control_plane, tmp_path, core_v1, custom, namespace,
                                                               node_set):
    node_set(gpus=4)
    tag = node_set.tag
    team = f"team-{tag}"
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", queue(team))
    try:
        with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as first:
            wait_for(lambda: team in first.cache.queues.objects, TIMEOUT, what="the cache sees the queue")
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup("train", team))
            core_v1.create_namespaced_pod(namespace, gang_pod("train-0", "train", tag, gpus=2))
            wait_for(lambda: "train-0" in bound_pods(core_v1, namespace), TIMEOUT, what="the job bound")
            text = wait_for(lambda: usage_annotation(custom, team), TIMEOUT, what="the usage record written")
        record = parse_usage(text)
        assert (record.half_life, record.window) == (HALF_LIFE, WINDOW)
        (tmp_path / "again").mkdir()
        with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path / "again") as second:

            def carried_on():
                for result in second.results:
                    for status in result.queues:
                        # later than the record: the scheduler's times follow the apiserver's clock (Date headers,
                        # whole seconds), so they are compared with each other, never with this process's clock
                        if status.queue == team and status.usage is not None and status.usage.at > record.at:
                            return status.usage
                return None

            usage = wait_for(carried_on, TIMEOUT, what="a cycle of the new scheduler folding the queue's usage")
        # Folded from the record the first scheduler wrote, across the restart: the 2 GPUs held since then, each
        # second weighted 2^(-age/halfLife), plus what the record had, decayed.
        elapsed = usage.at - record.at
        assert elapsed > 0
        held = 2 * HALF_LIFE / math.log(2) * (1 - 2 ** (-elapsed / HALF_LIFE))
        before = record.used.get(GPU, 0.0) * 2 ** (-elapsed / HALF_LIFE)
        assert math.isclose(usage.used[GPU], held + before, rel_tol=1e-4), (usage, record)
    finally:
        custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", team)
