"""Layer `actions`: what a scheduling cycle does, in the order the config names them."""

from __future__ import annotations

from scheduler.actions.allocate import Allocate
from scheduler.actions.backfill import Backfill
from scheduler.actions.base import Action
from scheduler.actions.consolidate import Consolidate
from scheduler.actions.enqueue import Enqueue
from scheduler.actions.gang_evict import GangPreempt, GangReclaim
from scheduler.actions.preempt import Preempt
from scheduler.actions.reclaim import Reclaim

ACTIONS: dict[str, type[Action]] = {
    Enqueue.name: Enqueue,
    Allocate.name: Allocate,
    Backfill.name: Backfill,
    Preempt.name: Preempt,
    Reclaim.name: Reclaim,
    GangPreempt.name: GangPreempt,
    GangReclaim.name: GangReclaim,
    Consolidate.name: Consolidate,
}
