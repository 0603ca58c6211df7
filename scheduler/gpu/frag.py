"""Layer `gpu`: per-device GPU state on arrays, the fragmentation measure of FGD, and the placement policies.

The measure is the one of Weng et al., "Beware of Fragmentation" (USENIX ATC 2023). For a node n and a pod
shape m, the GPU capacity of n that m cannot use is its fragment F_n(m):
- if m cannot run on n at all (too little CPU or memory, a GPU model m does not accept, not enough devices
  with room for m's per-device share, or m asks for no GPU), every free GPU milli on n is a fragment;
- otherwise the free milli of the devices too small for m's per-device share are the fragment.
The node's expected fragmentation over a mix M of shapes with popularity p_m is F_n(M) = sum_m p_m F_n(m).
FGD places a pod on the node (and device) where F_n(M) grows least. M is the mix of shapes seen recently,
never the future (see `ShapeMix`).

FGD looks one pod ahead: a card left with r milli free counts r x (share of the mix too big for r). `fgd-next`
adds the pods after that (`card_waste`): W(r) = (1 - P(r)) r + sum_{m: d_m <= r} p_m W(r - d_m), the milli a
card with r free is expected to end with unused if pods keep arriving from the mix (P(r): the share of the mix
that fits r). A share placed on a card with f free adds W(f - d) - W(f) of it, weighed by `LOOKAHEAD`.
It also counts the GPUs a node's cpu and memory cannot serve (`STRAND`): the mix asks, on average, c cpu and
g memory per GPU milli, so a node with G free milli, C cpu and M memory left can serve at most min(C / c, M / g)
of its GPUs; the rest, max(0, G - min(C / c, M / g)), is stranded. It joins F_n(M), so a placement that spends
cpu a node's GPUs will need (a cpu-heavy pod on a node with little cpu per GPU) grows it, and one that uses
GPUs cpu could not have served shrinks it. FGD's per-shape fragment sees this only once a shape no longer fits.

Everything here works on numpy arrays over all nodes at once: `GpuArrays` holds, per node, the free milli of
each device (a node with fewer devices than the widest node has zeros in the tail), free CPU and memory, and
the GPU model. The deviceshare plugin and the packing benchmark share these functions, so the benchmark
measures exactly the scores the scheduler uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MILLI = 1000
POLICIES = ("fgd", "fgd-bestfit", "fgd-weighted", "fgd-blend", "fgd-next", "bestfit", "firstfit", "random")
DEFAULT_POLICY = "fgd-next"  # the deviceshare plugin's default (BENCHMARKS.md, issues 10 and 20)
# How a policy weighs the shapes it has seen: by count (the paper's popularity), or by count x (GPUs the shape
# asks for) to a power, which keeps rare large pods (8-GPU jobs) from being drowned by common small shares.
MIX_WEIGHTING = {
    "fgd": "count", "fgd-bestfit": "count", "fgd-weighted": "sqrt-gpu", "fgd-blend": "gpu^0.3", "fgd-next": "count"
}
WEIGHTING_POWER = {"count": 0.0, "gpu^0.3": 0.3, "sqrt-gpu": 0.5}
# The share of the seen weight the mix keeps (the FGD paper's "typical pods"); the rest count as if absent.
# `fgd-blend` keeps every shape (up to `ShapeMix.max_shapes`): the rare small shares are the ones that fill
# the gaps other shares leave, and leaving them out makes those gaps look dead.
MIX_COVERAGE = {"fgd-blend": 1.0, "fgd-next": 1.0}
# The best-fit tie-break under FGD: small enough never to override a real difference in fragmentation
# (the smallest one is p_m x 1 milli with p_m >= 1e-4 in practice), large enough to order equal ones.
TIE = 1e-7
# `fgd-blend` adds the best-fit score (in -1..0) x BLEND to minus the fragmentation growth (in milli GPU): a
# placement on an emptier node must save more than up to 50 milli of expected fragmentation to win. Tuned on
# openb seeds 100..119 (30, 35, 50, 70, 100, 200 tried; BENCHMARKS.md), never on the reported seeds 0..9.
BLEND = 50.0
# `fgd-next` (issue 20): the blend at 70, plus, for a GPU share, the card-level waste to come (LOOKAHEAD x the
# growth of W, see above; 0.3, 1, 3, 6, 12, 25 tried) and a card best fit (CARD_FIT milli per GPU the card keeps
# free). Tuned on openb gpushare40 and default, seeds 100..109 (BENCHMARKS.md), never on the reported 0..9.
BLENDS = {"fgd-blend": BLEND, "fgd-next": 70.0}
LOOKAHEAD = {"fgd-next": 12.0}
CARD_FIT = {"fgd-next": 50.0}
# `fgd-next` (issue 20, second step): + STRAND x the stranded GPU milli (see above) in F_n(M). Tuned on openb
# gpushare40 seeds 100..119 (0.1, 0.3, 1, 3 tried; 0.3-3 equal within a GPU), checked on 120..129 on every
# list (BENCHMARKS.md), never on the reported 0..9. The per-GPU cpu and memory are the mix's, unscaled.
STRAND = {"fgd-next": 1.0}

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Shape:
    """What a pod asks of a node: cpu (millicores), memory (any unit, the same as the node's), `count`
    devices with `milli` of each (1000 = a whole device), and the GPU models it accepts (None: any)."""

    cpu: int
    memory: int
    count: int = 0
    milli: int = 0
    models: frozenset[str] | None = None

    @property
    def gpu_milli(self) -> int:
        return self.count * self.milli

    @property
    def is_share(self) -> bool:
        return self.count == 1 and 0 < self.milli < MILLI

    @property
    def is_whole(self) -> bool:
        return self.count > 0 and self.milli == MILLI


def models_of(spec: str) -> frozenset[str] | None:
    """`V100M16|V100M32` -> the accepted models; empty -> None (any model)."""
    names = frozenset(part.strip() for part in spec.split("|") if part.strip())
    return names or None


class GpuArrays:
    """Free resources per node and per device. Only `apply`/`release` and `set_node` change it."""

    def __init__(
        self,
        free: npt.ArrayLike,
        cpu: npt.ArrayLike,
        memory: npt.ArrayLike,
        models: Sequence[str],
        devices: npt.ArrayLike | None = None,
    ) -> None:
        self.free = np.array(free, dtype=np.int64, ndmin=2)
        self.cpu = np.array(cpu, dtype=np.int64)
        self.memory = np.array(memory, dtype=np.int64)
        self.model_names: list[str] = sorted(set(models))
        lookup = {name: i for i, name in enumerate(self.model_names)}
        self.model = np.array([lookup[m] for m in models], dtype=np.int64)
        if devices is None:
            devices = (self.free > 0).sum(axis=1)
        self.devices = np.array(devices, dtype=np.int64)
        self.version = np.zeros(len(self.cpu), dtype=np.int64)

    @property
    def size(self) -> int:
        return len(self.cpu)

    def accepts(self, models: frozenset[str] | None) -> BoolArray:
        """Per model index, whether a pod accepting `models` may use it."""
        if models is None:
            return np.ones(len(self.model_names), dtype=bool)
        return np.array([name in models for name in self.model_names], dtype=bool)

    def fit_mask(self, shape: Shape, candidates: IntArray) -> BoolArray:
        """Per candidate: room for the pod's cpu, memory and devices, on a model it accepts."""
        ok = (self.cpu[candidates] >= shape.cpu) & (self.memory[candidates] >= shape.memory)
        if shape.count:
            ok &= self.accepts(shape.models)[self.model[candidates]]
            roomy = (self.free[candidates] >= shape.milli).sum(axis=1)
            ok &= roomy >= shape.count
        return ok

    def apply(self, node: int, shape: Shape, devices: Iterable[int], sign: int = 1) -> None:
        """Take (sign 1) or give back (sign -1) the pod's resources on `node`, on the given devices."""
        self.cpu[node] -= sign * shape.cpu
        self.memory[node] -= sign * shape.memory
        for device in devices:
            self.free[node, device] -= sign * shape.milli
        self.version[node] += 1

    def allocated_milli(self) -> int:
        return int(self.devices.sum()) * MILLI - int(self.free.sum())


# ---- choosing devices on one node --------------------------------------------------------------------


def first_fit_devices(free: IntArray, shape: Shape) -> tuple[int, ...] | None:
    """The lowest-index devices with room (Volcano's gpushare picks the first card that fits)."""
    roomy = np.flatnonzero(free >= shape.milli)
    if roomy.size < shape.count:
        return None
    return tuple(int(i) for i in roomy[: shape.count])


def best_fit_devices(free: IntArray, shape: Shape) -> tuple[int, ...] | None:
    """The devices with the least room that still fits (a whole-GPU pod only ever gets whole devices)."""
    roomy = np.flatnonzero(free >= shape.milli)
    if roomy.size < shape.count:
        return None
    order = roomy[np.argsort(free[roomy], kind="stable")]
    return tuple(sorted(int(i) for i in order[: shape.count]))


# ---- the shape mix -----------------------------------------------------------------------------------


class ShapeMix:
    """Popularity of the GPU pod shapes seen so far, optionally forgetting with a half-life (in pods).

    `weighting` "count" counts pods (the paper's popularity); "sqrt-gpu" weighs each pod by the square root of
    the GPUs it asks for, "gpu^0.3" by their 0.3 power (measured on openb: more GPUs allocated at 130% load than
    either count or GPU share).
    `top()` keeps the most popular shapes covering `coverage` of the weight (at most `max_shapes`), as the
    FGD paper's "typical pods". CPU-only shapes are left out: every free GPU is a fragment for them wherever
    a pod goes, so they add the same amount to every node's growth and never change a decision.
    """

    def __init__(
        self, *, half_life: float = 0.0, max_shapes: int = 64, coverage: float = 0.95, weighting: str = "count"
    ) -> None:
        if weighting not in WEIGHTING_POWER:
            raise ValueError(f"unknown shape weighting {weighting!r}; expected {', '.join(WEIGHTING_POWER)}")
        self.weighting = weighting
        self._power = WEIGHTING_POWER[weighting]
        self.half_life = half_life
        self.max_shapes = max_shapes
        self.coverage = coverage
        self.counts: dict[Shape, float] = {}
        self.seen = 0
        self._weight = 1.0

    def observe(self, shape: Shape) -> None:
        self.seen += 1
        if not shape.count:
            return
        if self.half_life > 0:
            self._weight *= 2.0 ** (1.0 / self.half_life)
            if self._weight > 1e100:  # rescale so the counts stay finite
                self.counts = {s: c / self._weight for s, c in self.counts.items()}
                self._weight = 1.0
        weight = self._weight * (shape.gpu_milli / MILLI) ** self._power
        self.counts[shape] = self.counts.get(shape, 0.0) + float(weight)

    def top(self) -> list[tuple[Shape, float]]:
        total = sum(self.counts.values())
        if total <= 0:
            return []
        ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0].cpu, kv[0].count, kv[0].milli))
        kept: list[tuple[Shape, float]] = []
        covered = 0.0
        for shape, count in ranked[: self.max_shapes]:
            kept.append((shape, count))
            covered += count
            if covered >= self.coverage * total:
                break
        return [(shape, count / covered) for shape, count in kept]


def mix_for(policy: str, half_life: float = 0.0) -> ShapeMix:
    """An empty shape mix with the weighting and coverage `policy` uses (count / 0.95 for a non-FGD policy)."""
    return ShapeMix(
        half_life=half_life, weighting=MIX_WEIGHTING.get(policy, "count"), coverage=MIX_COVERAGE.get(policy, 0.95)
    )


# ---- the fragmentation model -------------------------------------------------------------------------


class FragModel:
    """F_n(M) for every node, kept current as nodes change, and the growth of F_n(M) a placement causes."""

    def __init__(
        self, arrays: GpuArrays, mix: Sequence[tuple[Shape, float]], lookahead: float = 0.0, strand: float = 0.0
    ) -> None:
        self.arrays = arrays
        self.mix = tuple(mix)
        self.lookahead = lookahead
        self.strand = strand
        shapes = [s for s, _ in self.mix]
        self.p = np.array([p for _, p in self.mix], dtype=np.float64)
        self.d = np.array([s.milli for s in shapes], dtype=np.int64)
        self.k = np.array([s.count for s in shapes], dtype=np.int64)
        self.c = np.array([s.cpu for s in shapes], dtype=np.int64)
        self.mem = np.array([s.memory for s in shapes], dtype=np.int64)
        # access[model, shape]: the shape accepts that GPU model
        self.access = (
            np.stack([arrays.accepts(s.models) for s in shapes], axis=1)
            if shapes
            else np.zeros((len(arrays.model_names), 0), dtype=bool)
        )
        self.waste = card_waste(self.d, self.p) if lookahead else np.zeros(MILLI + 1)
        # The mix's mean cpu and memory per GPU milli asked (0: the mix asks none, nothing is stranded by it).
        gpu = float(self.p @ (self.k * self.d)) if shapes else 0.0
        self.cpu_per = float(self.p @ self.c) / gpu if gpu > 0 else 0.0
        self.mem_per = float(self.p @ self.mem) / gpu if gpu > 0 else 0.0
        self.versions = arrays.version.copy()
        everyone = np.arange(arrays.size)
        self.cnt, self.low = self._terms(arrays.free)
        self.frag = self._frag(everyone, self.cnt, self.low, arrays.free.sum(axis=1), arrays.cpu, arrays.memory)

    def _terms(self, free: IntArray) -> tuple[IntArray, IntArray]:
        """cnt[n, m]: devices with room for m's share; low[n, m]: free milli of the devices without."""
        fits = free[:, :, None] >= self.d[None, None, :]
        cnt = fits.sum(axis=1)
        low = (free[:, :, None] * ~fits).sum(axis=1)
        return cnt, low

    def _frag(
        self, nodes: IntArray, cnt: IntArray, low: IntArray, total: IntArray, cpu: IntArray, memory: IntArray
    ) -> FloatArray:
        ok = self.access[self.arrays.model[nodes]] & (cnt >= self.k)
        ok &= (cpu[:, None] >= self.c) & (memory[:, None] >= self.mem)
        result: FloatArray = np.where(ok, low, total[:, None]) @ self.p
        if self.strand:
            result = result + self.strand * self.stranded(total, cpu, memory)
        return result

    def stranded(self, total: IntArray, cpu: IntArray, memory: IntArray) -> FloatArray:
        """Per node: the free GPU milli (`total`) beyond what its cpu and memory left can serve at the mix's mean
        cpu and memory per GPU milli."""
        servable = np.full(total.shape, np.inf)
        if self.cpu_per > 0:
            servable = np.minimum(servable, np.maximum(cpu, 0) / self.cpu_per)
        if self.mem_per > 0:
            servable = np.minimum(servable, np.maximum(memory, 0) / self.mem_per)
        result: FloatArray = np.maximum(total - servable, 0.0)
        return result

    def sync(self) -> None:
        """Recompute the nodes whose arrays changed since the last call."""
        stale = np.flatnonzero(self.arrays.version != self.versions)
        if stale.size == 0:
            return
        a = self.arrays
        cnt, low = self._terms(a.free[stale])
        self.cnt[stale], self.low[stale] = cnt, low
        self.frag[stale] = self._frag(stale, cnt, low, a.free[stale].sum(axis=1), a.cpu[stale], a.memory[stale])
        self.versions[stale] = a.version[stale]

    def growth(self, shape: Shape, nodes: IntArray) -> tuple[FloatArray, IntArray]:
        """Per candidate node: the least growth of F_n(M) placing `shape` there, and for a GPU share the device
        that achieves it (-1 otherwise). Candidates must fit the shape."""
        self.sync()
        a = self.arrays
        cpu, memory = a.cpu[nodes] - shape.cpu, a.memory[nodes] - shape.memory
        total = a.free[nodes].sum(axis=1)
        if shape.is_share:
            return self._share_growth(shape, nodes, cpu, memory, total)
        if shape.count == 0 or shape.is_whole:
            # Whole devices go from 1000 to 0: every shape loses `count` roomy devices; no device gets small.
            cnt = self.cnt[nodes] - shape.count
            after = self._frag(nodes, cnt, self.low[nodes], total - shape.gpu_milli, cpu, memory)
            return after - self.frag[nodes], np.full(nodes.size, -1, dtype=np.int64)
        free = a.free[nodes].copy()  # several partial devices: rare, so the plain way
        for row, node in enumerate(nodes):
            chosen = best_fit_devices(a.free[node], shape) or ()
            free[row, list(chosen)] -= shape.milli
        cnt, low = self._terms(free)
        after = self._frag(nodes, cnt, low, free.sum(axis=1), cpu, memory)
        return after - self.frag[nodes], np.full(nodes.size, -1, dtype=np.int64)

    def _share_growth(
        self, shape: Shape, nodes: IntArray, cpu: IntArray, memory: IntArray, total: IntArray
    ) -> tuple[FloatArray, IntArray]:
        # Devices of a node with the same free milli are interchangeable: score each (node, free) pair once.
        free = self.arrays.free[nodes]
        rows, cols = np.nonzero(free >= shape.milli)
        keys = rows * (MILLI + 1) + free[rows, cols]
        keys, first = np.unique(keys, return_index=True)  # sorted: a node's pairs are contiguous
        row, device = rows[first], cols[first]
        before = free[row, device]
        after_dev = before - shape.milli
        d = self.d[None, :]
        cnt = self.cnt[nodes[row]] + (after_dev[:, None] >= d) - (before[:, None] >= d)
        low = self.low[nodes[row]] + after_dev[:, None] * (after_dev[:, None] < d)
        low -= before[:, None] * (before[:, None] < d)
        grown = self._frag(nodes[row], cnt, low, total[row] - shape.milli, cpu[row], memory[row])
        grown -= self.frag[nodes[row]]
        if self.lookahead:
            grown += self.lookahead * (self.waste[after_dev] - self.waste[before])
        # Best device on each node: least growth, then the fullest device (best fit) on a tie.
        order = np.lexsort((before, np.round(grown, 9), row))
        head = order[np.r_[True, row[order][1:] != row[order][:-1]]]
        growth = np.full(nodes.size, np.inf)
        chosen = np.full(nodes.size, -1, dtype=np.int64)
        growth[row[head]] = grown[head]
        chosen[row[head]] = device[head]
        return growth, chosen


def card_waste(milli: IntArray, p: FloatArray) -> FloatArray:
    """W(r) for r = 0..1000 (see the module docstring): the expected unused milli of a card with r free, if pods
    of the mix (per-card demand `milli`, popularity `p`) keep coming and each goes on it when it fits."""
    by_milli: dict[int, float] = {}
    for d, q in zip(milli.tolist(), p.tolist(), strict=True):
        if d > 0:
            by_milli[d] = by_milli.get(d, 0.0) + q
    demands = sorted(by_milli.items())
    waste = [0.0] * (MILLI + 1)
    for r in range(1, MILLI + 1):
        fits = ahead = 0.0
        for d, q in demands:
            if d > r:
                break
            fits += q
            ahead += q * waste[r - d]
        waste[r] = (1.0 - fits) * r + ahead
    return np.array(waste)


def frag_model(policy: str, arrays: GpuArrays, mix: Sequence[tuple[Shape, float]]) -> FragModel:
    """The fragmentation model `policy` scores with (with the card look-ahead and stranding for `fgd-next`)."""
    return FragModel(arrays, mix, LOOKAHEAD.get(policy, 0.0), STRAND.get(policy, 0.0))


# ---- policies: one score per candidate node (higher is better) and the devices on the chosen node ------


@dataclass(slots=True)
class Scored:
    scores: FloatArray
    share_device: IntArray | None = None  # per candidate, the device FGD picked for a GPU share


def bestfit_scores(arrays: GpuArrays, shape: Shape, nodes: IntArray, max_cpu: int, max_gpu: int) -> FloatArray:
    """The paper's best-fit baseline: least (cpu, GPU) left after placement, each normalised, weight 1/2."""
    cpu_left = (arrays.cpu[nodes] - shape.cpu) / max(max_cpu, 1)
    gpu_left = (arrays.free[nodes].sum(axis=1) - shape.gpu_milli) / max(max_gpu, 1)
    result: FloatArray = -(0.5 * cpu_left + 0.5 * gpu_left)
    return result


def score_nodes(
    policy: str,
    arrays: GpuArrays,
    shape: Shape,
    nodes: IntArray,
    frag: FragModel | None = None,
    rng: np.random.Generator | None = None,
) -> Scored:
    """Scores of the candidate `nodes` (which fit `shape`) under `policy`; see POLICIES."""
    if policy == "random":
        generator = rng if rng is not None else np.random.default_rng(0)
        return Scored(generator.random(nodes.size))
    if policy == "firstfit":
        return Scored(-nodes.astype(np.float64))
    max_cpu, max_gpu = int(arrays.cpu.max(initial=1)), int(arrays.devices.max(initial=1)) * MILLI
    if policy == "bestfit":
        return Scored(bestfit_scores(arrays, shape, nodes, max_cpu, max_gpu))
    if policy in MIX_WEIGHTING:
        if frag is None:
            return Scored(bestfit_scores(arrays, shape, nodes, max_cpu, max_gpu) * TIE)
        growth, device = frag.growth(shape, nodes)
        scores = -growth
        if policy != "fgd":
            blend = BLENDS.get(policy, TIE)
            scores = scores + blend * bestfit_scores(arrays, shape, nodes, max_cpu, max_gpu)
        if shape.is_share and policy in CARD_FIT:
            kept = arrays.free[nodes, np.maximum(device, 0)] - shape.milli
            scores = scores - CARD_FIT[policy] * kept / MILLI
        return Scored(scores, device if shape.is_share else None)
    raise ValueError(f"unknown GPU placement policy {policy!r}; expected one of {', '.join(POLICIES)}")


def devices_on(policy: str, arrays: GpuArrays, node: int, shape: Shape, share_device: int = -1) -> tuple[int, ...]:
    """The devices a pod of `shape` takes on `node` under `policy` (empty for a pod without GPUs)."""
    if not shape.count:
        return ()
    if share_device >= 0:
        return (share_device,)
    free = arrays.free[node]
    chosen = first_fit_devices(free, shape) if policy in ("firstfit", "random") else best_fit_devices(free, shape)
    if chosen is None:
        raise ValueError(f"node {node} has no devices for {shape}")
    return chosen
