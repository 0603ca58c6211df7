"""Layer `jobs`: a networkTopology names its highest tier by number or by name, never both.

Volcano's webhooks refuse a spec that sets both `highestTierAllowed` and `highestTierName`: a Job's
`spec.networkTopology` and each task's `partitionPolicy.networkTopology`, on create and on update
(pkg/webhooks/admission/jobs/validate/admit_job.go validateNetworkTopology, validateJobUpdate), and a PodGroup's
`spec.networkTopology` and each `subGroupPolicy[*].networkTopology` on create
(pkg/webhooks/admission/podgroups/validate/validate_podgroup.go validateNetworkTopology).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BOTH = "must not set both highestTierAllowed and highestTierName (at most one names the highest tier)"


def sets_both(topology: object) -> bool:
    return (isinstance(topology, Mapping) and topology.get("highestTierAllowed") is not None
            and bool(topology.get("highestTierName")))


def job_tier_problems(spec: Mapping[str, Any]) -> list[str]:
    """A Job's own networkTopology. Its tasks' partition topologies are checked with the rest of each partition
    policy, as Volcano's validatePartitionPolicy does (jobs/partitions.py)."""
    return [f"spec.networkTopology: {BOTH}"] if sets_both(spec.get("networkTopology")) else []


def podgroup_tier_problems(spec: Mapping[str, Any]) -> list[str]:
    """A PodGroup's: its networkTopology and the first sub-group policy that sets both (Volcano stops there)."""
    problems = [f"spec.networkTopology: {BOTH}"] if sets_both(spec.get("networkTopology")) else []
    for index, policy in enumerate(spec.get("subGroupPolicy") or ()):
        if isinstance(policy, Mapping) and sets_both(policy.get("networkTopology")):
            problems.append(f"spec.subGroupPolicy[{index}].networkTopology: {BOTH}")
            break
    return problems
