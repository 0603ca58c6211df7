"""Layer `plugins`: `pdb` keeps preempt and reclaim within each PodDisruptionBudget's `disruptionsAllowed`.

As Volcano's pdb plugin (pkg/scheduler/plugins/pdb/pdb.go), served at the Preemptable and Reclaimable points
(the legacy `preempt` and `reclaim` actions; Volcano's gang actions ask another point). Each time it is asked
(once per node and preemptor), it walks the candidates in the order given (lowest priority first) with every
PDB's `status.disruptionsAllowed` as the budget:

- a pod with no labels matches no PDB, and Volcano's plugin then leaves it out of the victims altogether (its
  loop skips it before adding it); so does this one;
- each PDB of the pod's namespace whose selector matches its labels (a nil or empty selector matches nothing)
  loses one from its budget, unless the pod is in its `status.disruptedPods` (the API counted it already);
- a pod that takes some budget below zero is kept off the victims; the budget it took stays taken.

The budget is the PDB's status as read, afresh for each question, as in Volcano: it is not reduced by the
evictions a cycle has already decided on other nodes (the disruption controller counts them once they happen).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.disruption import DisruptionBudget
from scheduler.api.job import TaskInfo
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin, SessionAPI


class PdbPlugin(Plugin[NoArgs]):
    name = "pdb"

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.budgets = ssn.disruption_budgets

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return within_budgets(self.budgets, candidates)

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return within_budgets(self.budgets, candidates)


def within_budgets(budgets: Sequence[DisruptionBudget], candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The candidates, in order, that every matching budget still allows (see the module's rules)."""
    pdbs = [b for b in budgets if b.selector is not None]
    left = [b.allowed for b in pdbs]
    kept = []
    for task in candidates:
        if not task.labels:
            continue  # Volcano: "a pod with no labels will not match any PDB", and is not added to the victims
        violated = False
        for i, pdb in enumerate(pdbs):
            if not pdb.selects(task.namespace, task.labels) or task.name in pdb.disrupted:
                continue
            left[i] -= 1
            violated = violated or left[i] < 0
        if not violated:
            kept.append(task)
    return kept
