"""Layer `plugins`: `resourcequota` admits a job only while its minResources fit its namespace's ResourceQuotas.

As Volcano's resourcequota plugin (pkg/scheduler/plugins/resourcequota/resourcequota.go), served at the
JobEnqueueable point with the job-enqueued hook (both behind `enableJobEnqueued`):

- A job with no `minResources` is permitted, and so is a job in a namespace without a ResourceQuota.
- Otherwise, for each ResourceQuota of the namespace (its *status*, as the quota controller writes it; a quota
  without `status.hard` limits nothing yet), on every resource name both the quota's `hard` and the job's
  minResources spell (exactly: `requests.cpu` matches `requests.cpu` only, `cpu` only `cpu`; no name is
  translated, so a hand-written minResources `{cpu: 4}` is not held to a quota of `requests.cpu`), the quota's
  `used` plus what this session already admitted in the namespace plus the job's amount must not pass `hard`.
  volcano-py's job controller writes the quota names into minResources as Volcano's does (`count/pods`, `pods`,
  `cpu` and `requests.cpu`, `limits.cpu`, ...: jobs/expand.py `quota_usage`), so a Job's PodGroup meets either.
- The first quota that fails (by name; Volcano takes them in Go's map order) rejects the job with one
  `ResourceQuotaExceeded` reason per resource it passes; enqueue keeps the job Pending with that reason.
- A job that passes is *permitted* (Volcano's `util.Permit`, not an abstention): under Volcano's tier rule the
  first tier with a permit and no rejection decides, so a later tier's enqueue gates (proportion, capacity,
  overcommit) are not asked for it. Put resourcequota in the tier of those gates to have them all count.
- Once a job is enqueued, its whole minResources is added to its namespace's admitted amounts for the rest of the
  session (Volcano's JobEnqueued function). Between sessions only the quota's `used` remembers it, once its pods
  exist: the apiserver's quota admission is the last word on pod creation.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.decision import SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo
from scheduler.api.quota import ResourceQuotaInfo
from scheduler.api.reasons import ResourceQuotaExceeded
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin, SessionAPI


def over_quota(quota: ResourceQuotaInfo, request: Mapping[str, int],
               enqueued: Mapping[str, int]) -> list[ResourceQuotaExceeded]:
    """The resources of `quota` that `request`, on top of its used and the session's `enqueued`, would pass
    (quotav1.Mask / Add / LessThanOrEqual in Volcano's plugin: only names both the quota's hard and the request
    spell are compared)."""
    over = []
    for name, hard in sorted(quota.hard.items()):
        if name not in request:
            continue
        reason = ResourceQuotaExceeded(quota.namespace, quota.name, name, hard, quota.used.get(name, 0),
                                       enqueued.get(name, 0), request[name])
        if reason.total > hard:
            over.append(reason)
    return over


class ResourceQuotaPlugin(Plugin[NoArgs]):
    name = "resourcequota"

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.quotas: dict[str, list[ResourceQuotaInfo]] = {}
        for quota in sorted(ssn.resource_quotas, key=lambda q: (q.namespace, q.name)):
            self.quotas.setdefault(quota.namespace, []).append(quota)
        self.enqueued: dict[str, dict[str, int]] = {}  # namespace -> minResources admitted this session

    def job_enqueueable(self, job: JobInfo) -> Status:
        request = job.quota_request
        quotas = self.quotas.get(job.namespace)
        if request is None or not quotas:
            return SUCCESS
        enqueued = self.enqueued.get(job.namespace, {})
        for quota in quotas:
            over = over_quota(quota, request, enqueued)
            if over:
                return unschedulable(*over)
        return SUCCESS

    def on_job_enqueued(self, job: JobInfo) -> None:
        if job.quota_request is None or job.namespace not in self.quotas:
            return
        admitted = self.enqueued.setdefault(job.namespace, {})
        for name, amount in job.quota_request.items():
            admitted[name] = admitted.get(name, 0) + amount
