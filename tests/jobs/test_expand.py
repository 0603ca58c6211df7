from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from jobs_seeds import SEEDS, seed

from scheduler.jobs import normalize_job, plugin_objects, pod_for, podgroup_for, pods_for, validate_job


def env_of(pod: dict[str, Any], container: int = 0) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][container]["env"]}


def job(tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"tasks": tasks, **spec}}


def task(name: str, replicas: int | None = None, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"name": name, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}, **extra}
    if replicas is not None:
        t["replicas"] = replicas
    return t


@dataclass(frozen=True, slots=True)
class NormCase:
    name: str
    job: dict[str, Any]
    path: tuple[Any, ...]
    expected: Any


NORM_CASES = [
    NormCase("queue defaults to default", job([task("w", 2)]), ("spec", "queue"), "default"),
    NormCase("a user queue is kept", job([task("w", 2)], queue="q1"), ("spec", "queue"), "q1"),
    NormCase("maxRetry defaults to 3", job([task("w", 2)]), ("spec", "maxRetry"), 3),
    NormCase("schedulerName defaults to volcano-py", job([task("w")]), ("spec", "schedulerName"), "volcano-py"),
    NormCase("a user schedulerName is kept", job([task("w")], schedulerName="volcano"),
             ("spec", "schedulerName"), "volcano"),
    # Go clients (vcctl, Volcano's e2e UpdateJob) omit `replicas: 0`: absent means 0, as in Volcano.
    NormCase("task replicas default to 0, Go's zero value", job([task("w")]), ("spec", "tasks", 0, "replicas"), 0),
    NormCase("task minAvailable defaults to replicas", job([task("w", 4)]),
             ("spec", "tasks", 0, "minAvailable"), 4),
    NormCase("job minAvailable defaults to the sum of task minAvailable",
             job([task("a", 4, minAvailable=2), task("b", 3)]), ("spec", "minAvailable"), 5),
    NormCase("a user job minAvailable is kept", job([task("a", 4)], minAvailable=1), ("spec", "minAvailable"), 1),
    NormCase("an unnamed task is named default<index>", job([task("a"), {"template": {}}]),
             ("spec", "tasks", 1, "name"), "default1"),
    NormCase("unknown fields are kept untouched", job([task("a")], networkTopology={"mode": "hard"}),
             ("spec", "networkTopology"), {"mode": "hard"}),
]


@pytest.mark.parametrize("case", NORM_CASES, ids=[c.name for c in NORM_CASES])
def test_normalize_job(case: NormCase) -> None:
    out: Any = normalize_job(case.job)
    for key in case.path:
        out = out[key]
    assert out == case.expected


def test_normalize_does_not_mutate_its_input() -> None:
    original = job([task("a", 2)])
    normalize_job(original)
    assert original == job([task("a", 2)])


@pytest.mark.parametrize("name", sorted(SEEDS), ids=sorted(SEEDS))
def test_every_seed_job_is_accepted_as_written(name: str) -> None:
    assert validate_job(seed(name)) == []
    assert len(pods_for(seed(name))) == sum(t["replicas"] for t in seed(name)["spec"]["tasks"])


def test_pod_carries_volcano_labels_annotations_and_owner() -> None:
    j = job([task("ps", 1), task("worker", 3)], queue="q1", priorityClassName="high")
    j["metadata"]["uid"] = "u-1"
    j["status"] = {"version": 2}
    pod = pod_for(j, 1, 2)
    meta = pod["metadata"]
    assert meta["name"] == "j-worker-2" and meta["namespace"] == "ns"
    expected = {"volcano.sh/job-name": "j", "volcano.sh/job-namespace": "ns", "volcano.sh/task-spec": "worker",
                "volcano.sh/task-name": "worker", "volcano.sh/task-index": "2", "volcano.sh/queue-name": "q1"}
    for k, v in expected.items():
        assert meta["labels"][k] == v
    for k, v in {"scheduling.k8s.io/group-name": "j-u-1", "volcano.sh/job-name": "j", "volcano.sh/task-spec": "worker",
                 "volcano.sh/task-index": "2", "volcano.sh/job-version": "2", "volcano.sh/queue-name": "q1"}.items():
        assert meta["annotations"][k] == v
    assert meta["ownerReferences"] == [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j",
                                        "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]
    assert pod["spec"]["schedulerName"] == "volcano-py"
    assert pod["spec"]["priorityClassName"] == "high"
    assert pod["spec"]["restartPolicy"] == "Always"


def test_template_values_win_over_job_defaults() -> None:
    t = task("w", 1)
    t["template"]["spec"].update(schedulerName="other", priorityClassName="low", restartPolicy="OnFailure")
    pod = pod_for(job([t], priorityClassName="high"), 0, 0)
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"], pod["spec"]["restartPolicy"]) == (
        "other", "low", "OnFailure")


def test_a_job_without_uid_gets_no_owner_reference() -> None:
    assert "ownerReferences" not in pod_for(job([task("w")]), 0, 0)["metadata"]


@dataclass(frozen=True, slots=True)
class PreemptCase:
    name: str
    job_value: Any
    task_value: Any
    expected: str | None


PREEMPT_CASES = [
    PreemptCase("job preemptable false marks pods not preemptable", False, None, "false"),
    PreemptCase("task preemptable overrides the job", False, True, "true"),
    PreemptCase("no preemptable setting adds nothing", None, None, None),
]


@pytest.mark.parametrize("case", PREEMPT_CASES, ids=[c.name for c in PREEMPT_CASES])
def test_preemptable(case: PreemptCase) -> None:
    t = task("w", 1) if case.task_value is None else task("w", 1, preemptable=case.task_value)
    j = job([t]) if case.job_value is None else job([t], preemptable=case.job_value)
    meta = pod_for(j, 0, 0)["metadata"]
    assert meta["annotations"].get("volcano.sh/preemptable") == case.expected
    assert meta["labels"].get("volcano.sh/preemptable") == case.expected


def test_seed_urgent_job_pods_are_not_preemptable() -> None:
    for pod in pods_for(seed("urgent-job")):
        assert pod["metadata"]["annotations"]["volcano.sh/preemptable"] == "false"
        assert pod["metadata"]["labels"]["volcano.sh/preemptable"] == "false"
        assert pod["spec"]["priorityClassName"] == "high-priority"


def test_podgroup_mirrors_the_job() -> None:
    pytest.importorskip("scheduler.api.resources")
    j = job([task("ps", 1), task("worker", 3, minAvailable=2)], queue="q1", priorityClassName="high")
    j["metadata"]["uid"] = "u-1"
    pg = podgroup_for(j)
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pg["kind"] == "PodGroup"
    assert pg["metadata"]["name"] == "j-u-1" and pg["metadata"]["namespace"] == "ns"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"ps": 1, "worker": 2}
    assert pg["spec"]["queue"] == "q1" and pg["spec"]["priorityClassName"] == "high"


def gpu_task(name: str, replicas: int, gpus: int, **extra: Any) -> dict[str, Any]:
    t = task(name, replicas, **extra)
    t["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return t


@dataclass(frozen=True, slots=True)
class MinResCase:
    name: str
    job: dict[str, Any]
    gpus: str | None


MINRES_CASES = [
    MinResCase("four single-GPU workers with limits only need four GPUs", seed("distributed-training"), "4"),
    MinResCase("each task's minAvailable counts before extra replicas",
               job([gpu_task("a", 4, 1, minAvailable=1), gpu_task("b", 2, 2, minAvailable=2)], minAvailable=4),
               "6"),
    MinResCase("a job minAvailable below the task minimums takes the first pods in task order",
               job([gpu_task("a", 4, 1, minAvailable=2), gpu_task("b", 2, 2)], minAvailable=3), "3"),
    MinResCase("minAvailable zero needs nothing", job([gpu_task("a", 2, 1, minAvailable=0)], minAvailable=0), None),
]


@pytest.mark.parametrize("case", MINRES_CASES, ids=[c.name for c in MINRES_CASES])
def test_podgroup_min_resources(case: MinResCase) -> None:
    pytest.importorskip("scheduler.api.resources")
    assert podgroup_for(case.job)["spec"]["minResources"].get("nvidia.com/gpu") == case.gpus


def test_min_pod_specs_orders_tasks_by_priority_class_value() -> None:
    from scheduler.jobs import min_pod_specs

    low, high = gpu_task("low", 2, 1), gpu_task("high", 2, 2)
    low["template"]["spec"]["priorityClassName"] = "lo"
    high["template"]["spec"]["priorityClassName"] = "hi"
    j = normalize_job(job([low, high], minAvailable=1))
    specs = min_pod_specs(j, {"hi": 100, "lo": 1})
    assert [s["priorityClassName"] for s in specs] == ["hi"]


# ---------------------------------------------------------------------------------------------- plugins


def test_env_plugin_sets_task_index_on_containers_and_init_containers() -> None:
    t = task("w", 2)
    t["template"]["spec"]["initContainers"] = [{"name": "init", "image": "x"}]
    pod = pod_for(job([t], plugins={"env": []}), 0, 1)
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env["VK_TASK_INDEX"] == "1" and env["VC_TASK_INDEX"] == "1"


def test_seed_pytorch_distributed_gets_a_rendezvous() -> None:
    pods = pods_for(seed("pytorch-distributed"))
    envs = [env_of(p) for p in pods]
    assert {e["MASTER_ADDR"] for e in envs} == {"pytorch-distributed-worker-0.pytorch-distributed.default.svc"}
    assert pods[0]["spec"]["hostname"] == "pytorch-distributed-worker-0"
    assert pods[0]["spec"]["subdomain"] == "pytorch-distributed"
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert {e["MASTER_PORT"] for e in envs} == {"23456"}
    assert [e["VK_TASK_INDEX"] for e in envs] == ["0", "1", "2", "3"]


def test_svc_plugin_creates_headless_service_and_hosts_configmap() -> None:
    objs = {o["kind"]: o for o in plugin_objects(seed("pytorch-distributed"))}
    svc, cm = objs["Service"], objs["ConfigMap"]
    assert svc["metadata"]["name"] == "pytorch-distributed"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"]["volcano.sh/job-name"] == "pytorch-distributed"
    assert cm["metadata"]["name"] == "pytorch-distributed-svc"
    hosts = [f"pytorch-distributed-worker-{i}.pytorch-distributed" for i in range(4)]
    assert cm["data"]["worker.host"] == "\n".join(hosts)
    assert cm["data"]["VC_WORKER_HOSTS"] == ",".join(hosts)
    assert cm["data"]["VC_WORKER_NUM"] == "4"
    assert objs["NetworkPolicy"]["spec"]["policyTypes"] == ["Ingress"]
    env = env_of(pod_for(seed("pytorch-distributed"), 0, 0))
    assert env["VC_WORKER_HOSTS"] == {"configMapKeyRef": {"name": "pytorch-distributed-svc",
                                                          "key": "VC_WORKER_HOSTS"}}


def test_svc_rank_is_global_across_tasks_in_spec_order() -> None:
    j = job([task("master", 1), task("worker-pool", 3)], plugins={"svc": []})
    ranks = [env_of(p)["RANK"] for p in pods_for(j)]
    assert ranks == ["0", "1", "2", "3"]
    assert env_of(pod_for(j, 1, 0))["VC_WORKER_POOL_NUM"]["configMapKeyRef"]["key"] == "VC_WORKER_POOL_NUM"
    assert env_of(pod_for(j, 1, 2))["MASTER_ADDR"] == "j-master-0.j.ns.svc"


def test_plugins_never_override_user_env() -> None:
    t = task("w", 2)
    t["template"]["spec"]["containers"][0]["env"] = [{"name": "MASTER_PORT", "value": "1234"},
                                                     {"name": "RANK", "value": "7"}]
    env = env_of(pod_for(job([t], plugins={"svc": []}), 0, 1))
    assert env["MASTER_PORT"] == "1234" and env["RANK"] == "7" and env["WORLD_SIZE"] == "2"


def test_pytorch_plugin_follows_volcano() -> None:
    j = job([task("master", 1), task("worker", 3)], plugins={"pytorch": ["--master=master", "--worker=worker",
                                                                         "--port=29500"], "svc": []})
    pods = pods_for(j)
    envs = [env_of(p) for p in pods]
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
    assert {e["MASTER_ADDR"] for e in envs} == {"j-master-0.j"}
    assert {e["MASTER_PORT"] for e in envs} == {"29500"}
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert pods[1]["spec"]["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]


def test_tensorflow_plugin_writes_tf_config_as_volcano_does() -> None:
    j = job([task("ps", 1), task("worker", 2), task("eval", 1)],
            plugins={"tensorflow": ["--evaluator=eval", "--port=2223"], "svc": []})
    configs = {p["metadata"]["name"]: json.loads(env_of(p)["TF_CONFIG"]) for p in pods_for(j)}
    cluster = {"ps": ["j-ps-0.j:2223"], "worker": ["j-worker-0.j:2223", "j-worker-1.j:2223"],
               "evaluator": ["j-eval-0.j:2223"]}
    assert configs["j-worker-1"] == {"cluster": cluster, "task": {"type": "worker", "index": 1}}
    assert configs["j-eval-0"]["task"] == {"type": "evaluator", "index": 0}
    assert configs["j-ps-0"]["task"] == {"type": "ps", "index": 0}
    assert list(configs["j-ps-0"]["cluster"]) == ["ps", "worker", "evaluator"]  # Volcano's key order


def test_tensorflow_plugin_leaves_a_stand_alone_pod_alone() -> None:
    pods = pods_for(job([task("worker", 1)], plugins={"tensorflow": []}))
    assert not any(e["name"] == "TF_CONFIG" for e in pods[0]["spec"]["containers"][0].get("env") or ())


def test_ssh_plugin_mounts_a_generated_key_secret() -> None:
    j = job([task("w", 2)], plugins={"ssh": []})
    objs = plugin_objects(j, keygen=lambda: ("PRIVATE", "ssh-rsa PUBLIC\n"))
    import base64

    secret = objs[0]
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "j-ssh"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["id_rsa"] == "PRIVATE" and data["authorized_keys"] == "ssh-rsa PUBLIC\n"
    assert "Host j-w-1\n  HostName j-w-1.j\n" in data["config"]
    pod = pod_for(j, 0, 0)
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "j-ssh"
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/root/.ssh"


def test_ssh_default_keygen_makes_a_real_key_pair() -> None:
    pytest.importorskip("cryptography")
    from scheduler.jobs.plugins import default_keygen

    private, public = default_keygen()
    assert "PRIVATE KEY" in private and public.startswith("ssh-rsa ")


def test_job_volumes_are_mounted_into_every_container() -> None:
    j = job([task("w", 1)], volumes=[{"mountPath": "/data", "volumeClaimName": "data-pvc"}])
    pod = pod_for(j, 0, 0)
    assert pod["spec"]["volumes"] == [{"name": "j-volume-0", "persistentVolumeClaim": {"claimName": "data-pvc"}}]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "j-volume-0", "mountPath": "/data"}]


def test_a_jobs_network_topology_reaches_its_podgroup() -> None:
    from scheduler.jobs.expand import podgroup_for

    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}],
        },
    }
    assert podgroup_for(job)["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


def test_min_resources_carry_volcanos_quota_usage_keys_which_the_scheduler_ignores() -> None:
    """test/e2e/jobp/job_controlled_resource.go "Generate PodGroup and valid minResource when creating job": two
    one-pod tasks asking (and limited to) cpu 1, memory 1000Mi, one GPU."""
    from scheduler.api.convert import job_from_podgroup

    amounts = {"cpu": "1000m", "memory": "1000Mi", "nvidia.com/gpu": "1"}
    container = {"name": "c", "image": "nginx", "resources": {"requests": amounts, "limits": amounts}}
    job = {"metadata": {"name": "job-name-podgroup", "namespace": "ns", "uid": "u"},
           "spec": {"tasks": [{"name": name, "replicas": 1, "minAvailable": 1,
                               "template": {"spec": {"containers": [container]}}} for name in ("task-1", "task-2")]}}
    podgroup = podgroup_for(job)
    assert podgroup["spec"]["minResources"] == {
        "count/pods": "2", "pods": "2", "cpu": "2", "requests.cpu": "2", "limits.cpu": "2",
        "memory": "2000Mi", "requests.memory": "2000Mi", "limits.memory": "2000Mi",
        "nvidia.com/gpu": "2", "requests.nvidia.com/gpu": "2"}
    info = job_from_podgroup(podgroup)
    assert info.min_resources is not None
    assert dict(info.min_resources.items()) == {"cpu": 2000, "memory": 2000 * 2**20, "pods": 2,
                                               "nvidia.com/gpu": 2000}
