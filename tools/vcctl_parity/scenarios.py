"""The scenarios compare.py runs with vcctl and volcano-py: objects, a command line, files it reads.

Timestamps are fixed (the job tables print dates, in UTC here) or absent where a table prints an age, so the
recorded output does not depend on when it was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BATCH, SCHED, FLOW = "batch.volcano.sh/v1alpha1", "scheduling.volcano.sh/v1beta1", "flow.volcano.sh/v1alpha1"


@dataclass(frozen=True)
class Scenario:
    name: str
    args: list[str]
    objects: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    exact: bool = True  # False: a difference we know of and keep (docs/operations.md says which); not recorded
    failure: bool = False  # the command fails: vcctl says so on stdout, volcano-py on stderr; stdout not compared


def job(
    name: str,
    namespace: str = "ml",
    *,
    queue: str = "",
    scheduler: str = "volcano",
    tasks: list[Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    created: str = "2025-12-31T23:30:00Z",
    **meta: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "minAvailable": 1,
        "tasks": tasks
        or [
            {
                "name": "worker",
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
            }
        ],
    }
    if queue:
        spec["queue"] = queue
    m: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        **meta,
    }
    if labels:
        m["labels"] = labels
    return {"apiVersion": BATCH, "kind": "Job", "metadata": m, "spec": spec, "status": status or {}}


JOBS = [
    job(
        "train",
        queue="team-a",
        status={"state": {"phase": "Running"}, "minAvailable": 2, "running": 2, "pending": 1, "retryCount": 1},
    ),
    job(
        "a-much-longer-job-name",
        queue="team-b",
        scheduler="volcano-py",
        labels={"volcano.sh/job-type": "Mpi"},
        tasks=[{"name": "m", "replicas": 1}, {"name": "w", "replicas": 4}, {"name": "x"}],
        status={"state": {"phase": "Pending"}, "minAvailable": 5, "succeeded": 3, "failed": 2, "unknown": 1},
    ),
    job("fresh", created="2026-01-01T00:00:00Z"),
    job("elsewhere", namespace="research-and-development", queue="team-a", status={"state": {"phase": "Completed"}}),
]


def queue(name: str, weight: int | None = 1, state: str | None = "Open", parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {} if weight is None else {"weight": weight}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": SCHED,
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"state": state} if state else {},
    }


def podgroup(name: str, queue_name: str, phase: str, namespace: str = "ml") -> dict[str, Any]:
    spec = {"minMember": 1, **({"queue": queue_name} if queue_name else {})}
    return {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


QUEUES = [
    queue("default"),
    queue("team-a", 3, parent="root"),
    queue("team-b", None, "Closed"),
    queue("a-queue-with-a-name-longer-than-25", 10, None),
]
PODGROUPS = [
    podgroup("pg1", "team-a", "Running"),
    podgroup("pg2", "team-a", "Inqueue"),
    podgroup("pg3", "team-a", "Pending", "other"),
    podgroup("pg4", "team-b", "Completed"),
    podgroup("pg5", "team-b", "Unknown"),
    podgroup("pg6", "", "Running"),
    podgroup("pg7", "default", ""),
    podgroup("pg8", "default", "Running"),
]


def pod(
    name: str,
    namespace: str = "ml",
    *,
    job_name: str = "train",
    queue_name: str = "team-a",
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    containers: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    labels = {"volcano.sh/job-name": job_name, "volcano.sh/queue-name": queue_name} if job_name else {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels, **extra}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)]},
        "status": status or {"phase": "Pending"},
    }


def running(ready: bool = True, restarts: int = 0) -> dict[str, Any]:
    return {"ready": ready, "restartCount": restarts, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


PODS = [
    pod(
        "train-worker-0",
        status={
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [running(restarts=2)],
        },
    ),
    pod(
        "train-worker-1",
        containers=2,
        status={
            "phase": "Running",
            "containerStatuses": [
                running(),
                {"ready": False, "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            ],
        },
    ),
    pod(
        "train-master-0",
        status={
            "phase": "Succeeded",
            "containerStatuses": [{"ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        },
    ),
    pod(
        "train-ps-0",
        status={
            "phase": "Failed",
            "containerStatuses": [{"ready": False, "state": {"terminated": {"exitCode": 137, "signal": 9}}}],
        },
    ),
    pod("a-very-long-pod-name-of-another-job-0", job_name="other", queue_name="team-b"),
    pod(
        "gated-0",
        job_name="other",
        queue_name="team-b",
        status={"phase": "Pending", "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]},
    ),
    pod(
        "leaving-0",
        job_name="other",
        queue_name="team-b",
        deletionTimestamp="2026-01-01T00:00:00Z",
        status={"phase": "Running"},
    ),
    pod(
        "plain-web-0",
        job_name="",
        annotations={"scheduling.volcano.sh/queue-name": "team-a"},
        status={"phase": "Running"},
    ),
    pod(
        "init-1",
        job_name="other",
        queue_name="team-b",
        status={
            "phase": "Pending",
            "initContainerStatuses": [{"name": "setup", "state": {"waiting": {"reason": "ErrImagePull"}}}],
        },
    ),
    pod("train-worker-2", namespace="prod", status={"phase": "Running"}),
]
PODS[-2]["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]

VIEWED = job(
    "viewed",
    queue="team-a",
    created="2026-01-01T00:00:00Z",
    labels={"app": "<ml>", "volcano.sh/job-type": "Mpi"},
    annotations={"note": "a & b"},
    generation=3,
    resourceVersion="42",
    generateName="view-",
    tasks=[
        {
            "name": "master",
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {"kubernetes.io/availablezone": "az-1"}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "imagePullSecrets": [{"name": "regcred"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "mpi:1",
                            "command": ["mpirun", "-n", "4"],
                            "workingDir": "/work",
                            "ports": [{"containerPort": 22, "name": "ssh"}],
                            "resources": {"limits": {"cpu": "2000m", "memory": "1024Mi"}, "requests": {"cpu": "0.5"}},
                        }
                    ],
                },
            },
        },
        {"name": "worker", "replicas": 4},
    ],
    status={
        "state": {"phase": "Running"},
        "running": 4,
        "pending": 1,
        "minAvailable": 5,
        "version": 2,
        "terminating": 1,
        "controlledResources": {"plugin-svc": "svc"},
        "conditions": [{"status": "Pending", "lastTransitionTime": "2026-01-01T00:00:01Z"}, {"status": "Running"}],
    },
)
VIEWED["spec"]["plugins"] = {"env": [], "ssh": ["--no-root"], "svc": []}
EVENTS = [
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "viewed.17a1", "namespace": "ml"},
        "type": "Normal",
        "reason": "PodGroupPending",
        "count": 1,
        "message": " PodGroup ml:viewed unschedule ",
        "source": {"component": "vc-controller-manager"},
    },
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "viewed.17a2", "namespace": "ml"},
        "type": "Warning",
        "reason": "FailedScheduling",
        "count": 3,
        "message": "0/4 nodes are available",
        "source": {"component": "volcano", "host": "node-1"},
    },
    {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "viewed-other.17a3", "namespace": "ml"},
        "type": "Normal",
        "reason": "Other",
        "count": 1,
        "message": "not this job's",
    },
]


def flow(kind: str, name: str, namespace: str = "ml", phase: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": FLOW,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }
    if kind == "JobFlow":
        obj["spec"] = {
            "jobRetainPolicy": "retain",
            "flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}],
        }
        obj["status"] = {"state": {"phase": phase}} if phase else {}
    else:
        obj["spec"] = {
            "minAvailable": 1,
            "tasks": [
                {"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            ],
        }
    return obj


FLOWS = [
    flow("JobFlow", "etl", phase="Running"),
    flow("JobFlow", "a-longer-flow-name", phase="Succeed"),
    flow("JobFlow", "nightly", "prod"),
    flow("JobTemplate", "a"),
    flow("JobTemplate", "b-template"),
    flow("JobTemplate", "c", "prod"),
]
FLOW_FILE = """apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: new-flow
  namespace: ml
spec:
  jobRetainPolicy: delete
  flows:
  - name: a
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: etl
  namespace: ml
spec:
  flows:
  - name: a
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata:
  name: no-namespace
spec:
  flows:
  - name: b
"""
TEMPLATE_FILE = """apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata:
  name: a
  namespace: ml
spec:
  minAvailable: 1
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers:
        - name: c
          image: busybox
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata:
  name: fresh-template
spec:
  tasks:
  - name: t
    replicas: 2
"""
JOB_FILE = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: from-file
  namespace: ml
spec:
  minAvailable: 2
  schedulerName: volcano-py
  queue: team-a
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: main
          image: busybox
          command: [sleep, "10"]
          resources:
            requests: {cpu: 1000m, memory: 1024Mi}
            limits: {cpu: "1.5", nvidia.com/gpu: 1}
"""

SCENARIOS = [
    # ---- job list
    Scenario("job list in a namespace", ["job", "list", "-n", "ml"], JOBS),
    Scenario("job list in the default namespace, none there", ["job", "list"], JOBS),
    Scenario("job list --all-namespaces", ["job", "list", "--all-namespaces"], JOBS),
    Scenario("job list --queue", ["job", "list", "-n", "ml", "-q", "team-a"], JOBS),
    Scenario("job list --scheduler", ["job", "list", "-n", "ml", "-S", "volcano-py"], JOBS),
    Scenario("job list --selector", ["job", "list", "--all-namespaces", "--selector", "e"], JOBS),
    Scenario("job list --all-namespaces=true", ["job", "list", "--all-namespaces=true"], JOBS),
    Scenario("job list --all-namespaces=false", ["job", "list", "-n", "ml", "--all-namespaces=false"], JOBS),
    # ---- job run
    Scenario("job run with the defaults", ["job", "run", "-N", "demo"]),
    Scenario(
        "job run with every flag",
        [
            "job",
            "run",
            "--name",
            "demo",
            "-n",
            "ml",
            "-i",
            "nginx:1",
            "-m",
            "2",
            "-r",
            "3",
            "-R",
            "cpu=500m,memory=1024Mi",
            "-L",
            "cpu=2000m,nvidia.com/gpu=1",
            "-S",
            "volcano-py",
        ],
    ),
    Scenario(
        "job run with no requests or limits",
        ["job", "run", "-N", "bare", "-R", "", "-L", "", "-m", "0", "-r", "0", "-S", "", "-i", ""],
    ),
    Scenario("job run from a file", ["job", "run", "-f", "job.yaml", "-n", "ml"], files={"job.yaml": JOB_FILE}),
    Scenario("job run with a name already taken", ["job", "run", "-N", "train", "-n", "ml"], JOBS, failure=True),
    Scenario("job run without a name", ["job", "run"], failure=True),
    Scenario("job run with a bad resource list", ["job", "run", "-N", "x", "-R", "cpu"], failure=True),
    Scenario("job run with a bad quantity", ["job", "run", "-N", "x", "-L", "cpu=lots"], failure=True),
    Scenario(
        "job run from a file that is not yaml", ["job", "run", "-f", "job.json"], files={"job.json": "{}"}, failure=True
    ),
    # ---- job view
    Scenario("job view", ["job", "view", "-N", "viewed", "-n", "ml"], [VIEWED, *EVENTS]),
    Scenario(
        "job view with two controlled resources",
        ["job", "view", "-N", "viewed", "-n", "ml"],
        [{**VIEWED, "status": {**VIEWED["status"], "controlledResources": {"plugin-svc": "svc", "plugin-env": "e"}}}],
        exact=False,
    ),  # vcctl prints them in Go's random map order, we sort them
    Scenario("job view of a bare job", ["job", "view", "--name", "train", "--namespace", "ml"], JOBS),
    Scenario("job view of a missing job", ["job", "view", "-N", "nope", "-n", "ml"], JOBS, failure=True),
    Scenario("job view without a name", ["job", "view"], JOBS, failure=True),
    # ---- job suspend, resume, delete
    Scenario("job suspend", ["job", "suspend", "-N", "train", "-n", "ml"], JOBS),
    Scenario("job resume", ["job", "resume", "--name", "train", "--namespace", "ml"], JOBS),
    Scenario("job suspend of a missing job", ["job", "suspend", "-N", "nope", "-n", "ml"], JOBS, failure=True),
    Scenario("job delete", ["job", "delete", "-N", "train", "-n", "ml"], JOBS),
    Scenario("job delete of a missing job", ["job", "delete", "-N", "nope"], JOBS, failure=True),
    # ---- queue
    Scenario("queue list", ["queue", "list"], [*QUEUES, *PODGROUPS]),
    Scenario("queue list, no queues", ["queue", "list"], PODGROUPS),
    Scenario("queue get", ["queue", "get", "-n", "team-a"], [*QUEUES, *PODGROUPS]),
    Scenario(
        "queue get of a queue without state or weight", ["queue", "get", "--name", "team-b"], [*QUEUES, *PODGROUPS]
    ),
    Scenario("queue get of a missing queue", ["queue", "get", "-n", "nope"], QUEUES, failure=True),
    Scenario("queue get without a name", ["queue", "get"], QUEUES, failure=True),
    Scenario("queue create with the defaults", ["queue", "create"]),
    Scenario("queue create", ["queue", "create", "-n", "q1", "-w", "3", "-S", "Closed"]),
    Scenario("queue create with weight 0", ["queue", "create", "--name", "q0", "--weight", "0", "--state", ""]),
    Scenario("queue create of an existing queue", ["queue", "create", "-n", "team-a"], QUEUES, failure=True),
    Scenario("queue delete", ["queue", "delete", "-n", "team-a"], QUEUES),
    Scenario("queue delete without a name", ["queue", "delete"], QUEUES, failure=True),
    Scenario("queue operate open", ["queue", "operate", "-n", "team-b", "-a", "open"], QUEUES),
    Scenario("queue operate close", ["queue", "operate", "--name", "team-a", "--action", "close"], QUEUES),
    Scenario("queue operate update", ["queue", "operate", "-n", "team-a", "-a", "update", "-w", "7"], QUEUES),
    Scenario(
        "queue operate update without a weight",
        ["queue", "operate", "-n", "team-a", "-a", "update"],
        QUEUES,
        failure=True,
    ),
    Scenario("queue operate without an action", ["queue", "operate", "-n", "team-a"], QUEUES, failure=True),
    Scenario(
        "queue operate with an unknown action",
        ["queue", "operate", "-n", "team-a", "-a", "drain"],
        QUEUES,
        failure=True,
    ),
    Scenario(
        "queue operate of a missing queue", ["queue", "operate", "-n", "nope", "-a", "close"], QUEUES, failure=True
    ),
    # ---- pod list
    Scenario("pod list", ["pod", "list", "-n", "ml"], PODS),
    Scenario("pod list --all-namespaces", ["pod", "list", "--all-namespaces"], PODS),
    Scenario("pod list --job", ["pod", "list", "-n", "ml", "-j", "train"], PODS),
    Scenario("pod list --queue", ["pod", "list", "-n", "ml", "-q", "team-a"], PODS),
    Scenario("pod list --job --queue", ["pod", "list", "-n", "ml", "-j", "train", "-q", "team-a"], PODS),
    Scenario(
        "pod list --job of another queue",
        ["pod", "list", "-n", "ml", "-j", "train", "-q", "team-b"],
        PODS,
        failure=True,
    ),
    Scenario("pod list, none", ["pod", "list", "-n", "empty"], PODS),
    # ---- jobflow, jobtemplate
    Scenario("jobflow list", ["jobflow", "list", "-n", "ml"], FLOWS),
    Scenario("jobflow list --all-namespaces", ["jobflow", "list", "--all-namespaces"], FLOWS),
    Scenario("jobflow list, none", ["jobflow", "list"], FLOWS),
    Scenario("jobflow get", ["jobflow", "get", "-N", "etl", "-n", "ml"], FLOWS),
    Scenario("jobflow get of a flow with no phase", ["jobflow", "get", "-N", "nightly", "-n", "prod"], FLOWS),
    Scenario("jobflow get without a name", ["jobflow", "get"], FLOWS, failure=True),
    Scenario("jobflow create", ["jobflow", "create", "-f", "flows.yaml"], FLOWS[1:], files={"flows.yaml": FLOW_FILE}),
    Scenario(
        "jobflow create, one already there",
        ["jobflow", "create", "-f", "flows.yaml"],
        FLOWS,
        files={"flows.yaml": FLOW_FILE},
        exact=False,
    ),  # vcctl exits 0 after a failed document, we exit 1
    Scenario("jobflow delete", ["jobflow", "delete", "-N", "etl", "-n", "ml"], FLOWS),
    Scenario(
        "jobflow delete -f",
        ["jobflow", "delete", "-f", "flows.yaml"],
        FLOWS,
        files={"flows.yaml": FLOW_FILE},
        exact=False,
    ),  # default/no-namespace is not there: vcctl exits 0, we exit 1
    Scenario(
        "jobflow delete -f, all there",
        ["jobflow", "delete", "-f", "flows.yaml"],
        [*FLOWS, flow("JobFlow", "no-namespace", "default"), flow("JobFlow", "new-flow")],
        files={"flows.yaml": FLOW_FILE},
    ),
    Scenario("jobflow delete without a name", ["jobflow", "delete"], FLOWS, failure=True),
    Scenario("jobflow describe", ["jobflow", "describe", "-N", "etl", "-n", "ml"], FLOWS, exact=False),
    Scenario(
        "jobflow describe -o json", ["jobflow", "describe", "-N", "etl", "-n", "ml", "-o", "json"], FLOWS, exact=False
    ),
    Scenario("jobflow describe all", ["jobflow", "describe", "-n", "ml"], FLOWS, exact=False),
    Scenario("jobtemplate list", ["jobtemplate", "list", "-n", "ml"], FLOWS),
    Scenario("jobtemplate get", ["jobtemplate", "get", "-N", "b-template", "-n", "ml"], FLOWS),
    Scenario(
        "jobtemplate create", ["jobtemplate", "create", "-f", "t.yaml"], FLOWS[:3], files={"t.yaml": TEMPLATE_FILE}
    ),
    Scenario(
        "jobtemplate create, one already there",
        ["jobtemplate", "create", "-f", "t.yaml"],
        FLOWS,
        files={"t.yaml": TEMPLATE_FILE},
        exact=False,
    ),  # vcctl exits 0 after a failed document, we exit 1
    Scenario("jobtemplate delete", ["jobtemplate", "delete", "-N", "a", "-n", "ml"], FLOWS),
    Scenario(
        "jobtemplate delete of a missing template",
        ["jobtemplate", "delete", "-N", "zz", "-n", "ml"],
        FLOWS,
        failure=True,
    ),
    Scenario("jobtemplate describe", ["jobtemplate", "describe", "-N", "a", "-n", "ml"], FLOWS, exact=False),
]
