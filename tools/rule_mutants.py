"""Switch each rule off and show that its test fails: one mutation of the code per rule, in a scratch copy.

    .venv/bin/python tools/rule_mutants.py              # every rule
    .venv/bin/python tools/rule_mutants.py maxDomains   # the rules whose name contains this

For each rule: the mutation is applied to a fresh `git worktree` of HEAD (the checkout is never touched), the
rule's test is run there, and the first assertion line of its failure is printed. A mutation whose test still
passes is reported as NOT PINNED and the exit status is 1.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    rule: str
    path: str
    old: str
    new: str
    test: str
    more: tuple[tuple[str, str], ...] = ()  # further (old, new) edits of the same file


GE = "scheduler/actions/gang_evict.py"
T_GE = "tests/preemption/test_gang_evict.py"
MUTANTS = [
    Mutant("allowWholeBundle: false keeps safe bundles only", GE,
           "return [b for b in valid if b.kind == BundleKind.SAFE or self.allow_whole]", "return valid",
           f"{T_GE}::test_without_whole_bundles_a_rigid_gang_is_never_broken"),
    Mutant("safe bundles before whole ones", "scheduler/actions/bundles.py",
           "        if a.kind != b.kind:\n            return -1 if a.kind < b.kind else 1\n", "",
           f"{T_GE}::test_safe_bundles_go_before_whole_ones"),
    Mutant("role minimums keep a role out of the safe bundle", "scheduler/actions/bundles.py",
           "if job.min_available >= job.task_min_total():", "if False:",
           f"{T_GE}::test_role_minimums_keep_a_role_out_of_the_safe_bundle"),
    Mutant("gangpreempt takes only from lower-priority jobs", GE,
           "and preemptor.priority > owner.priority)", ")",
           f"{T_GE}::test_an_equal_priority_gang_is_never_a_victim"),
    Mutant("a plan is kept only if the preemptor is then pipelined", GE,
           "        stmt.rollback(mark)\n        return False\n", "        return False\n",
           f"{T_GE}::test_the_predicate_error_cache_changes_the_plan",
           (("return commit_or_discard(ssn, stmt, job, self.event_reason)", "stmt.commit()\n        return True"),)),
    Mutant("a PodGroup's volcano.sh/preemptable: false protects it", GE,
           'or owner.extra.get("preemptable") is False ', "",
           f"{T_GE}::test_a_podgroup_marked_not_preemptable_is_never_a_gang_victim"),
    Mutant("predicateErrorCacheEnable (per job and role)", GE,
           "cached = self.error_cache and bool(task.role) and key in turned_away", "cached = False",
           f"{T_GE}::test_the_predicate_error_cache_changes_the_plan"),
    Mutant("maxDomains bounds the domains searched", GE,
           "return found[: self.max_domains]", "return found",
           f"{T_GE}::test_max_domains_bounds_where_a_hard_topology_gang_looks"),
    Mutant("gangreclaim takes only from reclaimable queues", GE,
           "return victim_queue is not None and victim_queue.reclaimable", "return victim_queue is not None",
           f"{T_GE}::test_gangreclaim_never_takes_from_a_queue_that_is_not_reclaimable"),
    Mutant("capacity's Evictable keeps a queue's deserved share (gangreclaim)", "scheduler/plugins/capacity.py",
           "        if ctx.kind == EvictionKind.GANG_PREEMPT:\n            return list(candidates)\n",
           "        return list(candidates)\n",
           f"{T_GE}::test_capacity_protects_a_deserved_share_only_where_its_tier_is_asked"),
    Mutant("UnifiedEvictable: an empty intersection lets the next plugin answer whole",
           "scheduler/framework/combine.py",
           "agreed = [t for t in agreed if t.key in kept] or None", "agreed = [t for t in agreed if t.key in kept]",
           "tests/framework/test_evictable.py::test_after_an_empty_intersection_the_next_plugin_answers_whole"),
    Mutant("legacy preempt: the queue's Allocatable is part of 'the preemptor fits'",
           "scheduler/actions/preempt.py",
           "return (ssn.tiers.run(P.ALLOCATABLE, queue, preemptor).ok and preemptor.resreq <= node.future_idle()",
           "return (preemptor.resreq <= node.future_idle()",
           "tests/preemption/test_preempt_volcano_order.py"),
    Mutant("capacity: a queue that deserves nothing has share 1", "scheduler/plugins/capacity.py",
           "return attr.share if dimensions(attr.deserved) else Fraction(1)", "return attr.share",
           "tests/plugins/test_capacity_best_effort_share.py"),
    Mutant("a hard-topology preemptor is reserved on its victims' releasing room", "scheduler/actions/allocate.py",
           "if not answer.status.ok and reserve_in_domain(", "if False and reserve_in_domain(",
           f"{T_GE}::test_a_hard_topology_gang_waits_on_its_victims_room_instead_of_evicting_a_second_domain"),
    Mutant("a gang broken by eviction waits its turn in JobOrder", "scheduler/actions/allocate.py",
           "and j.phase not in (PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN))", ")",
           f"{T_GE}::test_a_gang_broken_by_eviction_does_not_take_back_its_preemptors_room"),
    Mutant("pdb: a pod in status.disruptedPods does not count against its budget", "scheduler/plugins/pdb.py",
           "or task.name in pdb.disrupted:", ":",
           "tests/plugins/test_pdb.py::test_a_pod_in_disrupted_pods_is_not_counted_again"),
    Mutant("pdb: each victim takes one from every matching budget", "scheduler/plugins/pdb.py",
           "            left[i] -= 1\n", "",
           "tests/plugins/test_pdb.py::test_no_budget_loses_more_than_it_allows_and_disrupted_pods_do_not_count"),
    Mutant("cdp: a Running pod is protected until PodScheduled + volcano.sh/cooldown-time", "scheduler/plugins/cdp.py",
           "and task.scheduled_at + task.cooldown > now", "and False",
           "tests/plugins/test_cdp.py::test_protection_ends_at_scheduled_plus_cooldown_and_needs_running"),
    Mutant("preemptionPolicy: Never preempts no one (preempt and reclaim)", "scheduler/actions/preempt.py",
           "return not task.preempt_never", "return True",
           "tests/preemption/test_preemption_policy.py::"
           "test_no_eviction_is_made_for_a_never_pod_and_without_the_field_there_are"),
    Mutant("an eviction writes DisruptionTarget (PreemptionByScheduler) before the delete",
           "scheduler/cache/evictor.py",
           '"reason": PREEMPTION_BY_SCHEDULER,', '"reason": "Evicted",',
           "tests/cache/test_evictor.py::"
           "test_the_condition_is_written_first_then_the_pod_is_deleted_with_its_uid_as_precondition"),
    Mutant("the delete leaves the grace period to the pod", "scheduler/cache/evictor.py",
           "        if self.grace_seconds is not None:  # else the pod's own terminationGracePeriodSeconds, "
           "as Volcano's delete\n"
           "            body[\"gracePeriodSeconds\"] = self.grace_seconds\n",
           "        body[\"gracePeriodSeconds\"] = self.grace_seconds or 0\n",
           "tests/cache/test_evictor.py::test_without_an_override_the_delete_leaves_the_grace_period_to_the_pod"),
]


def run(mutant: Mutant, python: str) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True)
        try:
            target = tree / mutant.path
            text = target.read_text()
            if mutant.old not in text:
                return False, f"the mutation no longer applies to {mutant.path}: update tools/rule_mutants.py"
            for old, _ in mutant.more:
                if old not in text:
                    return False, f"the mutation no longer applies to {mutant.path}: update tools/rule_mutants.py"
            text = text.replace(mutant.old, mutant.new, 1)
            for old, new in mutant.more:
                text = text.replace(old, new, 1)
            target.write_text(text)
            proc = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", mutant.test],
                                  cwd=tree, capture_output=True, text=True, env={"PYTHONPATH": str(tree),
                                                                                  "PATH": "/usr/bin:/bin"})
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("E ")]
            return proc.returncode != 0, (lines[0] if lines else proc.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


def main(argv: list[str]) -> int:
    python = str(REPO / ".venv" / "bin" / "python")
    chosen = [m for m in MUTANTS if not argv or any(a in m.rule for a in argv)]
    unpinned = 0
    for mutant in chosen:
        failed, line = run(mutant, python)
        unpinned += not failed
        verdict = "pinned    " if failed else "NOT PINNED"
        print(f"{verdict}  {mutant.rule}\n            {mutant.test}\n            {line}")
    return 1 if unpinned else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
