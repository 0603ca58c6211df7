"""Label and annotation keys and defaults shared by Job expansion and the lifecycle. Layer: jobs.

The keys the scheduler reads too are defined once, in `api` (group-name, task-spec and preemptable in
`api/pod.py`, task-index in `api/convert.py`).
"""

from __future__ import annotations

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_KIND = "Job"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
# Not set by Volcano (it uses task-spec); volcano-py adds it because published examples select on it.
TASK_NAME = "volcano.sh/task-name"
JOB_VERSION = "volcano.sh/job-version"
POD_TEMPLATE = "volcano.sh/template-uid"
NUMA_POLICY = "volcano.sh/numa-topology-policy"

DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano-py"
DEFAULT_MAX_RETRY = 3
DEFAULT_TASK_REPLICAS = 0  # an absent replicas is Go's zero value, as in Volcano (Go clients omit a 0)
DEFAULT_TASK_NAME = "default"
DEFAULT_NAMESPACE = "default"
DEFAULT_RESTART_POLICY = "Always"
