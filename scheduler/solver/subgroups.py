"""Layer `solver`: the gang placers (CP-SAT and the topology greedy, `cpsat.py`, `greedy.py`) and sub-groups.

A `GangProblem` bounds the span of the whole gang only; it has no notion of a sub-group that must be placed
whole, nor of one that must sit inside one domain of its own tier (PodGroup `spec.subGroupPolicy`,
`scheduler/api/subgroups.py`). Rather than return a placement that could split a sub-group, the
network-topology-aware placer abstains for a job with sub-groups, with one log line per job, and allocate's
sub-group placer (`scheduler/actions/subgroups.py`) places it sub-group by sub-group, domain by domain.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scheduler.api.subgroups import sub_group_job

if TYPE_CHECKING:
    from scheduler.api.job import JobInfo

log = logging.getLogger(__name__)
_LOGGED: set[str] = set()  # jobs already logged, so a job waiting for many cycles costs one line
_LOGGED_MAX = 10_000


def abstain_for_sub_groups(job: JobInfo) -> bool:
    """True (and one log line per job) when the gang placers must leave the job to the sub-group placer."""
    if not sub_group_job(job):
        return False
    if job.key not in _LOGGED:
        if len(_LOGGED) >= _LOGGED_MAX:
            _LOGGED.clear()
        _LOGGED.add(job.key)
        log.info("gang placer abstains for %s: it has sub-groups (whole, each in its own domain in hard "
                 "mode), which the CP-SAT model does not express; the sub-group placer places it", job.key)
    return True
