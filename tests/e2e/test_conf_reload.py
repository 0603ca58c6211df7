"""The scheduler conf file re-read on a real cluster (issue 22): the scheduler runs as a process on its mounted
file, as in its Deployment. Rewriting the file changes placements (binpack to spread); a broken file keeps the
last good conf, is reported once and raises `volcano_py_scheduler_conf_stale`; a broken file at start is one
line and exit 2, never a silent default."""

from __future__ import annotations

import uuid

import pytest
from controlplane import create_gpu_node, delete_node_and_pods, free_port, node_is_ready, wait_for
from processes import Process
from test_manifests import http_get, sample

GROUP = "scheduling.volcano.sh"
NODE_SET = "volcano-py.test/conf-reload"
TIMEOUT = 90
BINPACK = ('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
           "- plugins:\n  - name: predicates\n  - name: binpack\n")
SPREAD = ('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
          "- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 10\n"
          "      mostrequested.weight: 0\n      balancedresource.weight: 0\n")
BROKEN = 'actions: "enqueue, allocate\n'


@pytest.fixture
def two_nodes(core_v1):
    tag = uuid.uuid4().hex[:8]
    names = [f"reload-{tag}-{i}" for i in range(2)]
    for name in names:
        create_gpu_node(core_v1, name, gpus=0, cpu="8", labels={NODE_SET: tag})
    for name in names:
        wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
    yield tag, names
    for name in names:
        delete_node_and_pods(core_v1, name)


def pod(name: str, tag: str, cpu: str, *, group: str | None = None, node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox",
                                  "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if node:
        spec["nodeName"] = node  # placed by hand, as another scheduler's pod
    else:
        spec.update(schedulerName="volcano-py", nodeSelector={NODE_SET: tag})
    meta: dict = {"name": name}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def placed(core_v1, custom, namespace: str, tag: str, name: str) -> str:
    """Create a one-pod gang and return the node it is bound to."""
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": "default"}})
    core_v1.create_namespaced_pod(namespace, pod(name, tag, "1", group=name))
    return str(wait_for(lambda: core_v1.read_namespaced_pod(name, namespace).spec.node_name, TIMEOUT,
                        what=f"pod {name} bound"))


def test_a_rewritten_conf_changes_placements_and_a_broken_one_keeps_the_last_good(
        control_plane, core_v1, custom, namespace, two_nodes, tmp_path):
    tag, (fuller, emptier) = two_nodes
    core_v1.create_namespaced_pod(namespace, pod("filler", tag, "4", node=fuller))
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(BINPACK)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    scheduler = Process(control_plane, tmp_path, "scheduler", "scheduler", f"--scheduler-conf={conf}",
                        f"--listen-address=127.0.0.1:{port}", "--schedule-period=200ms", "--leader-elect=false")
    try:
        wait_for(lambda: http_get(f"{base}/readyz")[0] == 200, TIMEOUT, what="/readyz (caches synced)")

        def loads(result: str) -> float:
            status, text = http_get(f"{base}/metrics")
            assert status == 200
            return sample(text, "volcano_py_scheduler_conf_loads_total", result=result) or 0.0

        def stale() -> float | None:
            return sample(http_get(f"{base}/metrics")[1], "volcano_py_scheduler_conf_stale")

        assert placed(core_v1, custom, namespace, tag, "first") == fuller  # binpack: the node already in use
        loaded = loads("loaded")
        conf.write_text(SPREAD)
        wait_for(lambda: loads("loaded") == loaded + 1, TIMEOUT, interval=0.2, what="the new conf loaded")
        assert placed(core_v1, custom, namespace, tag, "second") == emptier  # least requested: the other one

        conf.write_text(BROKEN)
        wait_for(lambda: stale() == 1, TIMEOUT, interval=0.2, what="the conf reported stale")
        assert placed(core_v1, custom, namespace, tag, "third") == emptier  # still spreading: the last good conf
        # One report per bad file, not per cycle: the cycles since have not read it again.
        assert (loads("rejected"), loads("loaded")) == (1, loaded + 1)
        assert scheduler.alive()

        conf.write_text(BINPACK)
        wait_for(lambda: stale() == 0, TIMEOUT, interval=0.2, what="a good conf clears the stale gauge")
        assert placed(core_v1, custom, namespace, tag, "fourth") == fuller
    finally:
        assert scheduler.stop() == 0, scheduler.log()


def test_a_broken_conf_at_start_is_one_line_and_exit_2(control_plane, tmp_path):
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(BROKEN)
    scheduler = Process(control_plane, tmp_path, "scheduler", "scheduler", f"--scheduler-conf={conf}")
    assert scheduler.proc.wait(TIMEOUT) == 2
    scheduler.stop()
    (line,) = scheduler.log().splitlines()
    assert line.startswith(f"volcano-py: error: {conf}: invalid YAML")
