"""Layer `gpu`: what a pod asks of a node's GPU devices, the devices a snapshot's bound pods hold, and the
annotations the scheduler writes at bind time.

Volcano's GPU-sharing contract: a node advertises `volcano.sh/gpu-number` (cards) and `volcano.sh/gpu-memory`
(MiB, summed over its cards); a pod asks for `volcano.sh/gpu-memory` (MiB on one card) or `volcano.sh/gpu-number`
(whole cards). Plain `nvidia.com/gpu: N` is N whole cards; a milli value below 1000 (the simulator's trace
shares, e.g. `nvidia.com/gpu: 470m`) is that share of one card. Every request becomes a `Shape`: `count` cards
with `milli` thousandths of each, so one accounting (free milli per card, 1000 = idle) serves all three forms.

At bind the scheduler writes `volcano.sh/gpu-index` (the chosen card indices, comma-separated) and
`volcano.sh/predicate-time` (nanoseconds); a pod already bound carries them, so the next snapshot knows which
cards it holds. GPU models: a node's label `nvidia.com/gpu.product`; a pod lists acceptable models in the
annotation `volcano-py.io/gpu-spec` in the trace's form `V100M16|V100M32`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.api.job import TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.phases import OCCUPYING_STATUSES
from scheduler.api.resources import GPU
from scheduler.gpu.frag import (
    DEFAULT_POLICY,
    MILLI,
    FragModel,
    GpuArrays,
    Shape,
    devices_on,
    models_of,
    score_nodes,
)

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_SPEC_ANNOTATION = "volcano-py.io/gpu-spec"


def device_count(node: NodeInfo) -> int:
    """Cards on the node: `nvidia.com/gpu` or `volcano.sh/gpu-number`, whichever says more."""
    return max(node.allocatable.get(GPU), node.allocatable.get(GPU_NUMBER)) // MILLI


def card_memory(node: NodeInfo) -> int:
    """MiB of one card (0 when the node does not advertise volcano.sh/gpu-memory)."""
    cards = device_count(node)
    return node.allocatable.get(GPU_MEMORY) // MILLI // cards if cards else 0


def gpu_model(node: NodeInfo) -> str:
    return str(node.labels.get(GPU_PRODUCT_LABEL, ""))


def accepted_models(task: TaskInfo) -> frozenset[str] | None:
    return models_of(str(task.annotations.get(GPU_SPEC_ANNOTATION, "")))


def wants_gpu(task: TaskInfo) -> bool:
    return any(task.resreq.get(name) for name in (GPU, GPU_NUMBER, GPU_MEMORY))


def shape_on(task: TaskInfo, node: NodeInfo) -> Shape | None:
    """The task's request as a Shape on this node's cards (cpu millicores, memory bytes); None when the
    request cannot be expressed on these cards (a memory share bigger than one card, or no card size)."""
    request = task.resreq
    cpu, memory = request.cpu, request.memory
    models = accepted_models(task)
    mem_units = request.get(GPU_MEMORY)
    if mem_units:
        size = card_memory(node)
        if size <= 0:
            return None
        milli = -(-mem_units // size)  # ceil(MiB x 1000 / card MiB), so a share never understates its use
        if milli > MILLI:
            return None
        return Shape(cpu, memory, 1, milli, models)
    whole = max(request.get(GPU_NUMBER), request.get(GPU))
    if not whole:
        return Shape(cpu, memory, 0, 0, models)
    if whole < MILLI:
        return Shape(cpu, memory, 1, whole, models)
    return Shape(cpu, memory, -(-whole // MILLI), MILLI, models)


def parse_index(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(part) for part in str(value).split(",") if part.strip())
    except ValueError:
        return None


def node_state(nodes: Sequence[NodeInfo]) -> tuple[GpuArrays, dict[str, tuple[int, Shape, tuple[int, ...]]]]:
    """Per-device free milli for `nodes` (in order) from the tasks they hold, and who holds which cards.

    A bound task's cards come from its `volcano.sh/gpu-index` annotation; one without it (bound by another
    scheduler, or before this plugin ran) is given cards best-fit, so the totals stay right."""
    width = max((device_count(n) for n in nodes), default=0) or 1
    free = np.zeros((len(nodes), width), dtype=np.int64)
    for i, node in enumerate(nodes):
        free[i, : device_count(node)] = MILLI
    arrays = GpuArrays(
        free,
        [n.idle.cpu for n in nodes],
        [n.idle.memory for n in nodes],
        [gpu_model(n) for n in nodes],
        [device_count(n) for n in nodes],
    )
    holders: dict[str, tuple[int, Shape, tuple[int, ...]]] = {}
    for i, node in enumerate(nodes):
        for task in node.tasks.values():
            if task.status not in OCCUPYING_STATUSES or not wants_gpu(task):
                continue
            shape = shape_on(task, node)
            if shape is None or not shape.count:
                continue
            cards = parse_index(task.annotations.get(GPU_INDEX))
            if cards is None or len(cards) != shape.count or any(c < 0 or c >= device_count(node) for c in cards):
                cards = devices_on("bestfit", arrays, i, shape) if _fits(arrays, i, shape) else ()
            # cpu and memory are already out of node.idle: take the cards only
            for card in cards:
                arrays.free[i, card] = max(0, arrays.free[i, card] - shape.milli)
            holders[task.key] = (i, shape, tuple(cards))
    return arrays, holders


def _fits(arrays: GpuArrays, node: int, shape: Shape) -> bool:
    return bool((arrays.free[node] >= shape.milli).sum() >= shape.count)


def choose_devices(
    task: TaskInfo,
    node: NodeInfo,
    arrays: GpuArrays,
    index: int,
    policy: str = DEFAULT_POLICY,
    frag: FragModel | None = None,
) -> tuple[int, ...] | None:
    """The cards `task` takes on the node at `index` under `policy`; () for a task without GPUs; None when
    the node cannot hold it (model not accepted, no card with room, not enough idle cards)."""
    shape = shape_on(task, node)
    if shape is None:
        return None
    if not shape.count:
        return ()
    here = np.array([index], dtype=np.int64)
    model_ok = arrays.accepts(shape.models)[arrays.model[index]]
    if not model_ok or not _fits(arrays, index, shape):
        return None
    share_device = -1
    if shape.is_share and frag is not None and policy.startswith("fgd"):
        scored = score_nodes(policy, arrays, shape, here, frag)
        share_device = int(scored.share_device[0]) if scored.share_device is not None else -1
    return devices_on(policy, arrays, index, shape, share_device)


def bind_annotations(
    task: TaskInfo,
    node: NodeInfo,
    arrays: GpuArrays,
    index: int,
    now_ns: int,
    policy: str = DEFAULT_POLICY,
    frag: FragModel | None = None,
) -> tuple[tuple[int, ...], Mapping[str, str]] | None:
    """The cards chosen for `task` on `node` and the annotations to write on the pod at bind:
    `volcano.sh/gpu-index` ("0" or "2,3") and `volcano.sh/predicate-time` (`now_ns`). A task without GPUs
    gets ((), {}); None when the node cannot hold it."""
    cards = choose_devices(task, node, arrays, index, policy, frag)
    if cards is None:
        return None
    if not cards:
        return (), {}
    return cards, {GPU_INDEX: ",".join(str(c) for c in cards), PREDICATE_TIME: str(now_ns)}
