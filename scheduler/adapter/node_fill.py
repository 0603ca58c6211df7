"""Layer `adapter`: a node's tasks and accounting as the incremental snapshot builds it (`incremental.py`).

`fill` sums a node's accounting from its tasks in one pass; `load_of` takes it from the node's last build when
only some of its tasks went or were made again as they were (the same request, weighing the same): most of the
nodes a warm cycle rebuilds lost a pod that completed, or hold the pods the last session bound, now bound.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import OCCUPYING_STATUSES, TaskStatus
from scheduler.api.resources import Resource


def _weighs(status: TaskStatus) -> int:
    """How a task of `status` weighs on its node's accounting (`NodeInfo.add_task`): 0 not at all, 1 pipelined,
    2 used, 3 used and releasing."""
    if status is TaskStatus.PIPELINED:
        return 1
    if status in OCCUPYING_STATUSES:
        return 3 if status is TaskStatus.RELEASING else 2
    return 0


def _same_base(old: NodeInfo, base: NodeInfo) -> bool:
    """`old` was built from the node as read that `base` is (the very allocatable and labels)."""
    return (old.allocatable is base.allocatable and old.labels is base.labels and old.taints == base.taints
            and old.unschedulable == base.unschedulable and old.ready == base.ready)


def less(old: NodeInfo, keys: Mapping[str, object], base: NodeInfo, node: NodeInfo) -> bool:
    """Give `node` (empty, made from `base`) the tasks and accounting of `old` (its last build, untouched since,
    no task of it made again: the builder knows) but those whose keys are not in `keys`, in the order `old` has
    them, the ones that went taken off by the node's own rule. False (nothing done) when `old` came from another
    node as read or holds a key of `keys` it does not have."""
    if not _same_base(old, base):
        return False
    table = dict(old.tasks)
    if len(table) != len(keys):
        gone = table.keys() - keys.keys()
        if len(table) - len(gone) != len(keys):
            return False
    else:
        gone = set()
    node.idle, node.used, node.releasing, node.pipelined = old.idle, old.used, old.releasing, old.pipelined
    node.no_cpu_request, node.no_memory_request = old.no_cpu_request, old.no_memory_request
    node.tasks = table
    for key in gone:
        node.remove_task(table[key])
    node.touched = False
    return True


def load_of(old: NodeInfo, tasks: list[TaskInfo], base: NodeInfo, node: NodeInfo) -> bool:
    """Give `node` (empty, made from `base`) `tasks` in order and the accounting `fill` would sum, taken from the
    node's last build `old` when that is cheaper: `old` came from the same node as read (the very allocatable and
    labels), every task is one of `old`'s (whose accounting is current for its tasks as they are now, whatever a
    session did) and weighs as that one did (`_weighs`, an equal request); those of `old`'s that went are taken
    off. Integer sums, so the same values as `fill` (tests/adapter: every build compared with a cold one). False
    (nothing done) when not: `fill` then."""
    if not _same_base(old, base) or len(tasks) > len(old.tasks):
        return False
    before = old.tasks
    for task in tasks:
        was = before.get(task.key)
        if was is None:
            return False
        if was is not task and (_weighs(was.status) != _weighs(task.status)
                                or (was.resreq is not task.resreq and was.resreq != task.resreq)):
            return False
    node.idle, node.used, node.releasing, node.pipelined = old.idle, old.used, old.releasing, old.pipelined
    node.no_cpu_request, node.no_memory_request = old.no_cpu_request, old.no_memory_request
    table = node.tasks
    for task in tasks:
        table[task.key] = task
    if len(table) < len(before):
        for task in [task for key, task in before.items() if key not in table]:
            table[task.key] = task  # and taken off by the node's own rule (it pops the task from the table)
            node.remove_task(task)
    node.touched = False
    return True


def fill(node: NodeInfo, tasks: list[TaskInfo]) -> None:
    """`node.add_task` for each of `tasks` in order, the accounting summed once (integer sums: the same infos as
    one by one, which is what `build_snapshot` does)."""
    table = node.tasks
    used: list[Resource] = []
    pipelined: list[Resource] = []
    releasing: list[Resource] = []
    no_cpu = no_memory = 0
    for task in tasks:
        table[task.key] = task
        status, request = task.status, task.resreq
        if status is TaskStatus.PIPELINED:
            pipelined.append(request)
        elif status in OCCUPYING_STATUSES:
            used.append(request)
            no_cpu += not request.cpu
            no_memory += not request.memory
            if status is TaskStatus.RELEASING:
                releasing.append(request)
    if used:
        total = Resource.total(used)
        node.idle, node.used = node.idle - total, node.used + total
        node.no_cpu_request += no_cpu
        node.no_memory_request += no_memory
    if pipelined:
        node.pipelined = node.pipelined + Resource.total(pipelined)
    if releasing:
        node.releasing = node.releasing + Resource.total(releasing)
    node.touched = False

