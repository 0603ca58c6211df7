"""Label and annotation keys and defaults shared by Job expansion and the lifecycle. Layer: jobs."""

from __future__ import annotations

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_KIND = "Job"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
TASK_SPEC = "volcano.sh/task-spec"
# Not set by Volcano (it uses task-spec); volcano-py adds it because published examples select on it.
TASK_NAME = "volcano.sh/task-name"
TASK_INDEX = "volcano.sh/task-index"
JOB_VERSION = "volcano.sh/job-version"
POD_TEMPLATE = "volcano.sh/template-uid"
PREEMPTABLE = "volcano.sh/preemptable"
NUMA_POLICY = "volcano.sh/numa-topology-policy"
GROUP_NAME = "scheduling.k8s.io/group-name"

DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano-py"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_REPLICAS = 0  # an absent replicas is Go's zero value, as in Volcano (Go clients omit a 0)
DEFAULT_TASK_NAME = "default"
DEFAULT_NAMESPACE = "default"
DEFAULT_RESTART_POLICY = "Always"
