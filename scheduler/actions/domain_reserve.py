"""Layer `actions`: a gang with a hard network topology that the gang placer could not seat on idle room is
reserved, inside one domain of its allowed tiers, on room being released there.

Volcano's allocate (pkg/scheduler/actions/allocate/allocate.go, the HyperNode path) pipelines a task onto a node
whose future idle (idle plus releasing, less what is pipelined) holds it, and keeps a job pipelined that way as
a reservation; gangpreempt and gangreclaim then see it as not starving. volcano-py's topology placer seats a
gang on idle room only, so without this a gang whose victims were still terminating looked starving again the
next cycle, and gangpreempt evicted a second domain's victims for it (differential preemption seeds 8, 12, 27,
31, 40 and 45: twice Volcano's evictions).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import READY_STATUSES
from scheduler.api.queue import QueueInfo
from scheduler.framework import points as P
from scheduler.framework.evictable import Domain
from scheduler.framework.session import Session


def hard_topology(job: JobInfo) -> bool:
    topology = job.extra.get("networkTopology")
    return (isinstance(topology, dict) and str(topology.get("mode", "hard")).lower() == "hard"
            and topology.get("highestTierAllowed") is not None)


def in_search_root(job: JobInfo, domains: Sequence[Domain]) -> list[Domain]:
    """For a job that holds nodes, the domains inside its search root (Volcano's getSearchRoot: the HyperNode of
    its highest allowed tier around them, which the job's pods never leave): the widest listed domain holding all
    of them, and the listed domains inside it; none if no listed domain holds them. Any other job: all."""
    held = {t.node_name for t in job.tasks.values() if t.node_name and t.status in READY_STATUSES}
    if not held:
        return list(domains)
    around = [d for d in domains if held <= d.nodes]
    if not around:
        return []
    root = max(around, key=lambda d: (d.tier, len(d.nodes)))
    return [d for d in domains if d.nodes <= root.nodes]


def reserve_in_domain(ssn: Session, queue: QueueInfo, job: JobInfo, tasks: Sequence[TaskInfo]) -> bool:
    """Pipeline `tasks` (in order) into the first domain (EVICT_DOMAINS' order) where the job is then pipelined;
    the reservation is left in the session (not committed: nothing is bound). False, and nothing kept, if no
    domain holds it."""
    if not hard_topology(job) or not ssn.tiers.has(P.EVICT_DOMAINS):
        return False
    domains = ssn.tiers.run(P.EVICT_DOMAINS, job)
    if not isinstance(domains, list):
        return False
    for domain in in_search_root(job, domains):
        stmt = ssn.statement()
        for task in tasks:
            if not ssn.tiers.run(P.ALLOCATABLE, queue, task).ok:
                break
            nodes = [n for n in ssn.fit.feasible_nodes(task)
                     if n.name in domain.nodes and task.resreq <= n.future_idle()]
            node = ssn.fit.best_node(task, nodes) if nodes else None
            if node is None:
                break
            stmt.pipeline(task, node)
            if not ssn.tiers.run(P.JOB_PIPELINED, job).rejected:
                return True
        stmt.discard()
    return False
