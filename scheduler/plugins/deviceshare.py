"""Layer `plugins`: `deviceshare` — per-GPU accounting and fragmentation-aware GPU placement (Volcano's name).

Each session the plugin builds per-node per-card state from the snapshot's bound pods (their
`volcano.sh/gpu-index` annotations, see `scheduler.gpu.devices`) and keeps it current through session event
handlers, so a gang placed pod by pod inside one cycle sees the cards its earlier pods took. It scores
candidate nodes (BATCH_NODE_ORDER) with the policy of `scheduler.gpu.frag`:

- `fgd-next` (default): Fragmentation Gradient Descent (Weng et al., ATC 2023) over the mix of pod shapes
  seen recently (every shape, counted by pods), plus, for a GPU share, the waste its card's remainder is
  expected to end with as more pods of the mix come (`scheduler.gpu.frag.card_waste`, x12) and a card best fit,
  plus the GPUs a node's cpu and memory left cannot serve at the mix's cpu and memory per GPU (`stranded`),
  plus a best-fit term worth up to 70 milli GPU of growth — the best policy on the openb trace (BENCHMARKS.md);
- `fgd-blend`: FGD over every shape weighted by GPUs asked to the power 0.3, plus the best-fit term (up to 50
  milli); the default before issue 20;
- `fgd`: FGD as published; `fgd-bestfit`: FGD with best-fit tie-breaks; `fgd-weighted`: FGD over a mix
  weighted by sqrt(GPUs asked) with best-fit tie-breaks; `bestfit`, `firstfit`, `random`.

A node whose cards cannot hold the task (GPU model not in the pod's `volcano-py.io/gpu-spec`, no card with
room for a share, too few idle cards for whole GPUs) scores UNFIT, far below any real score. The cards chosen
for each placed task are in `assignments` (task uid -> card indices) and `bind_annotations` gives the
annotations to write at bind.

Arguments: `deviceshare.policy` (fgd-next), `deviceshare.weight` (1; the score is -100 x weight per GPU of
fragmentation growth, so one GPU of growth outweighs binpack's whole range), `deviceshare.halfLife` (pods
after which a seen shape counts half; 0 = never forget; default 5000). An unknown policy, or a weight that is
not finite, is a conf error; a negative weight is taken as it is, with a conf warning.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.gpu.devices import bind_annotations, choose_devices, node_state, shape_on, wants_gpu
from scheduler.gpu.frag import (
    DEFAULT_POLICY,
    MILLI,
    MIX_WEIGHTING,
    POLICIES,
    Shape,
    ShapeMix,
    frag_model,
    mix_for,
    score_nodes,
)

POLICY = "deviceshare.policy"
WEIGHT = "deviceshare.weight"
HALF_LIFE = "deviceshare.halfLife"
# A batch score of -inf vetoes the node: the session never places a task where a scorer says it cannot go
# (card-level fit is a property of the node's devices, which the cached predicates do not see).
UNFIT = -np.inf
SEEN_LIMIT = 100_000

# The shape mix outlives a session: "seen recently" spans cycles. One per (policy, half-life).
_MIXES: dict[tuple[str, float], tuple[ShapeMix, OrderedDict[str, None]]] = {}


def shared_mix(policy: str, half_life: float) -> tuple[ShapeMix, OrderedDict[str, None]]:
    key = (policy, half_life)
    if key not in _MIXES:
        _MIXES[key] = (mix_for(policy, half_life), OrderedDict())
    return _MIXES[key]


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    policy: str = DEFAULT_POLICY
    weight: float = 1.0
    half_life: float = 5000.0


class DeviceSharePlugin(Plugin[DeviceShareArgs]):
    name = "deviceshare"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> DeviceShareArgs:
        return DeviceShareArgs(
            policy=reader.choice(POLICY, DEFAULT_POLICY, POLICIES),
            weight=reader.finite(WEIGHT, 1.0),
            half_life=reader.number(HALF_LIFE, 5000.0),
        )

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.policy = self.args.policy
        self.weight = self.args.weight
        self.mix, seen = shared_mix(self.policy, self.args.half_life)
        self.state, self.holders = node_state(ssn.node_list)
        self.assignments: dict[str, tuple[int, ...]] = {}
        self._observe_pending(seen)
        self.frag = frag_model(self.policy, self.state, self.mix.top()) if self.policy in MIX_WEIGHTING else None
        self.rng = np.random.default_rng(0)

    def inactive_points(self) -> frozenset[str]:
        return frozenset() if self.weight else frozenset({"batch_node_order"})

    def _observe_pending(self, seen: OrderedDict[str, None]) -> None:
        """Add each pending task's shape to the mix once (by uid): the mix holds what arrived, not the future."""
        for job in self.ssn.jobs.values():
            for task in job.tasks.values():
                if task.status != TaskStatus.PENDING or task.key in seen or not wants_gpu(task):
                    continue
                seen[task.key] = None
                if len(seen) > SEEN_LIMIT:
                    seen.popitem(last=False)
                shape = self._nominal_shape(task)
                if shape is not None:
                    self.mix.observe(shape)

    def _nominal_shape(self, task: TaskInfo) -> Shape | None:
        """The task's shape on the first node with cards (memory-based shares depend on the card size)."""
        for node in self.ssn.node_list:
            if self.state.devices[self.ssn.arrays.position[node.name]]:
                return shape_on(task, node)
        return None

    # ---- scoring -----------------------------------------------------------------------------------
    def batch_node_order(self, task: TaskInfo, arrays: NodeArrays, indices: IntArray) -> np.ndarray:
        out = np.zeros(indices.size)
        if not wants_gpu(task) and self.frag is None:
            return out
        for key, rows in self._by_shape(task, indices).items():
            nodes = indices[rows]
            if key is None:
                out[rows] = UNFIT
                continue
            fits = self.state.fit_mask(key, nodes)
            out[rows[~fits]] = UNFIT
            if fits.any():
                scored = score_nodes(self.policy, self.state, key, nodes[fits], self.frag, self.rng)
                out[rows[fits]] = scored.scores * self._scale()
        return out

    def _scale(self) -> float:
        """FGD growth is in GPU milli: -100 points per GPU of growth. Other policies score in 0..1-ish."""
        return self.weight * (100.0 / MILLI if self.frag is not None else 100.0)

    def _by_shape(self, task: TaskInfo, indices: IntArray) -> dict[Shape | None, np.ndarray]:
        """Candidate rows grouped by the task's shape there (a memory share differs with the card size)."""
        groups: dict[Shape | None, list[int]] = {}
        sizes: dict[int, Shape | None] = {}
        nodes = self.ssn.node_list
        for row, i in enumerate(indices):
            node = nodes[int(i)]
            size = int(node.allocatable.get("volcano.sh/gpu-memory")) // max(1, int(self.state.devices[int(i)]))
            if size not in sizes:
                sizes[size] = shape_on(task, node)
            groups.setdefault(sizes[size], []).append(row)
        return {k: np.array(v, dtype=np.int64) for k, v in groups.items()}

    # ---- accounting inside the cycle -----------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        index = self.ssn.arrays.position.get(task.node_name)
        if index is None:
            return
        node = self.ssn.node_list[index]
        held = self.holders.get(task.key)
        if held is not None and held[0] == index:  # a task coming back (unmark releasing): same cards
            cards: tuple[int, ...] | None = held[2]
            shape = held[1]
        else:
            shape = shape_on(task, node)  # type: ignore[assignment]
            cards = choose_devices(task, node, self.state, index, self.policy, self.frag)
        if shape is not None and cards:
            for card in cards:
                self.state.free[index, card] -= shape.milli
            self.holders[task.key] = (index, shape, cards)
            self.assignments[task.key] = cards
        self._sync_node(index)

    def on_deallocate(self, task: TaskInfo) -> None:
        held = self.holders.get(task.key)
        self.assignments.pop(task.key, None)
        if held is None:
            index = self.ssn.arrays.position.get(task.node_name)
            if index is not None:
                self._sync_node(index)
            return
        index, shape, cards = held
        for card in cards:
            self.state.free[index, card] += shape.milli
        if task.status == TaskStatus.PENDING:  # undone: forget it; releasing keeps its record to come back
            del self.holders[task.key]
        self._sync_node(index)

    def _sync_node(self, index: int) -> None:
        idle = self.ssn.node_list[index].idle
        self.state.cpu[index], self.state.memory[index] = idle.cpu, idle.memory
        self.state.version[index] += 1

    # ---- bind ----------------------------------------------------------------------------------------
    def on_session_close(self, ssn: SessionAPI) -> None:
        """The cards chosen for every pod bound this cycle go on the pod, for Volcano's GPU device plugin."""
        now_ns = int(ssn.now * 1_000_000_000)
        for task_uid, _ in ssn.committed_binds():
            annotations = self._annotations_for_uid(task_uid, now_ns)
            if annotations:
                ssn.annotate(task_uid, annotations)

    def _annotations_for(self, task: TaskInfo, now_ns: int) -> dict[str, str]:
        return self._annotations_for_uid(task.key, now_ns)

    def _annotations_for_uid(self, task_uid: str, now_ns: int) -> dict[str, str]:
        """The bind annotations of a task this session placed (its recorded cards); {} for a task without."""
        cards = self.assignments.get(task_uid)
        if not cards:
            return {}
        return {"volcano.sh/gpu-index": ",".join(str(c) for c in cards), "volcano.sh/predicate-time": str(now_ns)}


__all__ = ["DeviceSharePlugin", "bind_annotations"]
