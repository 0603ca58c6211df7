"""A node goes NotReady under a running gang of a Volcano Job with `PodEvicted -> RestartJob` (issue 11).

4 nodes x 8 GPUs; a Job of 4 pods x 2 GPUs with `policies: [{event: PodEvicted, action: RestartJob}]` and, as
users who want a fast failover write, tolerations of the not-ready/unreachable NoExecute taints for 0 seconds.
The scheduler and the controllers run as processes. Once the gang runs, one of its nodes reports Ready=False
(the status patch a kubelet makes; the node is labelled so kwok does not report it Ready again).
kube-controller-manager's node lifecycle then taints it `node.kubernetes.io/not-ready` (NoSchedule and
NoExecute), its taint-eviction controller evicts the pod there, the Job controller's policy restarts the whole
Job, and the scheduler places the new gang as a whole on the nodes still Ready.
"""

from __future__ import annotations

import time
import uuid

from chaos_helpers import GROUP, NODE_SET, TIMEOUT, Process, list_pods, make_nodes, start_scheduler
from controlplane import FROZEN_LABEL, GPU_RESOURCE, assert_no_overcommit, set_node_ready, wait_for

BATCH = "batch.volcano.sh"
JOB_VERSION = "volcano.sh/job-version"
TOLERATE_NOT_READY = [
    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]


def job_manifest(name: str, tag: str) -> dict:
    container = {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "2"}}}
    return {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano-py", "minAvailable": 4, "maxRetry": 3,
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [{"name": "worker", "replicas": 4, "template": {"spec": {
                "nodeSelector": {NODE_SET: tag}, "tolerations": TOLERATE_NOT_READY,
                "terminationGracePeriodSeconds": 0, "containers": [container]}}}],
        },
    }


def running_gang(core_v1, namespace: str, version: int = 0) -> dict[str, tuple[str, str]] | None:
    """name -> (uid, node) when all 4 pods of run `version` of the job (`volcano.sh/job-version`) are bound and
    Running, and no other pod of the job is left."""
    pods = list_pods(core_v1, namespace)
    run = [p for p in pods if int((p["metadata"].get("annotations") or {}).get(JOB_VERSION, 0)) >= version
           and not p["metadata"].get("deletionTimestamp")]
    if len(pods) != 4 or len(run) != 4:
        return None
    if any(p["status"].get("phase") != "Running" or not p["spec"].get("nodeName") for p in run):
        return None
    return {p["metadata"]["name"]: (p["metadata"]["uid"], p["spec"]["nodeName"]) for p in run}


def test_a_node_going_not_ready_restarts_the_job_and_its_gang_lands_whole_elsewhere(
    control_plane, core_v1, custom, new_namespace, tmp_path
):
    tag = uuid.uuid4().hex[:6]
    nodes = make_nodes(core_v1, tag, 4)
    namespace = new_namespace("not-ready")
    scheduler = start_scheduler(control_plane, tmp_path)
    controllers = Process(control_plane, tmp_path, "controllers", "controllers", "--no-leader-elect")
    victim = None
    try:
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", job_manifest("train", tag))
        before = wait_for(lambda: running_gang(core_v1, namespace), TIMEOUT, interval=0.2, what="the gang running")
        victim = sorted(node for _, node in before.values())[0]
        on_victim = sorted(name for name, (_, node) in before.items() if node == victim)

        core_v1.patch_node(victim, {"metadata": {"labels": {FROZEN_LABEL: "true"}}})
        set_node_ready(core_v1, victim, False)
        went_not_ready = time.monotonic()

        def tainted():
            taints = core_v1.read_node(victim).spec.taints or []
            return {(t.key, t.effect) for t in taints} >= {("node.kubernetes.io/not-ready", "NoExecute")}

        wait_for(tainted, TIMEOUT, interval=0.2, what=f"kube-controller-manager taints {victim} not-ready")
        tainted_after = time.monotonic() - went_not_ready

        def restarted_elsewhere():
            """RestartJob bumps the job's version; every pod of the new run is new, Running, not on the victim."""
            job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")
            version = int((job.get("status") or {}).get("version", 0))
            now = running_gang(core_v1, namespace, version) if version >= 1 else None
            if not now or {uid for uid, _ in now.values()} & {uid for uid, _ in before.values()}:
                return None
            return now if victim not in {node for _, node in now.values()} else None

        after = wait_for(restarted_elsewhere, TIMEOUT, interval=0.2, what="the whole gang recreated on Ready nodes")
        recovered = time.monotonic() - went_not_ready
        job = custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")
        status = job.get("status") or {}
        assert int(status.get("retryCount", 0)) >= 1, status
        wait_for(lambda: (custom.get_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", "train")
                          .get("status") or {}).get("state", {}).get("phase") == "Running",
                 TIMEOUT, interval=0.2, what="the Job Running again")
        def podgroups() -> list:
            return list(custom.list_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups")["items"])

        # The PodGroup turns Running at the first cycle that sees its pods on nodes (Volcano's getPodGroupPhase),
        # one cycle after the binds: wait for it rather than read it once.
        wait_for(lambda: [(p.get("status") or {}).get("phase") for p in podgroups()] == ["Running"],
                 TIMEOUT, interval=0.2, what="the one PodGroup Running again")
        assert_no_overcommit(core_v1)
        assert scheduler.alive() and controllers.alive()
        print(f"\nnode {victim} NotReady under pods {on_victim}: tainted after {tainted_after:.1f}s, the whole gang "
              f"running again on {sorted({n for _, n in after.values()})} after {recovered:.1f}s "
              f"(retryCount {status.get('retryCount')}; the scheduler bound a whole gang "
              f"{scheduler.log().count('bound 4 pods in 1 gangs')} times)")
    finally:
        if victim:
            core_v1.patch_node(victim, {"metadata": {"labels": {FROZEN_LABEL: None}}})
            set_node_ready(core_v1, victim, True)
        controllers.stop()
        scheduler.stop()
        core_v1.delete_namespace(namespace)
        for name in nodes:
            core_v1.delete_node(name)
        print(controllers.log()[-2000:] if controllers.proc.returncode else "")
