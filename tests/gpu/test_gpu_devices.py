"""Per-GPU accounting, the fragmentation model and the deviceshare plugin (issue 10)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import pytest

from scheduler.api.convert import node_from_object, task_from_pod
from scheduler.cycle import conf_from_text
from scheduler.gpu.devices import GPU_INDEX, PREDICATE_TIME, bind_annotations, node_state
from scheduler.gpu.frag import MILLI, POLICIES, FragModel, GpuArrays, Shape, ShapeMix, devices_on, score_nodes
from scheduler.testing import cluster, node_object, pod_object


def arrays(*rows: list[int], models: list[str] | None = None, cpu: int = 64_000) -> GpuArrays:
    width = max(len(r) for r in rows)
    free = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        free[i, : len(r)] = r
    return GpuArrays(free, [cpu] * len(rows), [10**6] * len(rows), models or ["T4"] * len(rows), [len(r) for r in rows])


def place(policy: str, a: GpuArrays, shape: Shape, frag: FragModel | None = None) -> tuple[int, tuple[int, ...]] | None:
    everyone = np.arange(a.size)
    fits = everyone[a.fit_mask(shape, everyone)]
    if not fits.size:
        return None
    scored = score_nodes(policy, a, shape, fits, frag, np.random.default_rng(0))
    best = int(np.argmax(scored.scores))
    device = -1 if scored.share_device is None else int(scored.share_device[best])
    chosen = devices_on(policy, a, int(fits[best]), shape, device)
    a.apply(int(fits[best]), shape, chosen)
    return int(fits[best]), chosen


@pytest.mark.parametrize("policy", POLICIES)
def test_shares_on_one_device_never_exceed_1000_milli(policy: str) -> None:
    rng = np.random.default_rng(7)
    a = arrays([1000] * 2, [1000] * 4, [1000] * 8)
    mix = ShapeMix()
    shapes = [Shape(1000, 1, 1, int(m)) for m in (230, 470, 810, 1000)] + [Shape(1000, 1, 2, 1000)]
    for s in shapes:
        mix.observe(s)
    frag = FragModel(a, mix.top())
    for _ in range(60):
        place(policy, a, shapes[int(rng.integers(len(shapes)))], frag)
        assert (a.free >= 0).all() and (a.free <= MILLI).all()


def test_a_whole_gpu_pod_never_lands_on_a_partly_used_device() -> None:
    a = arrays([500, 1000, 1000])
    for policy in POLICIES:
        assert devices_on(policy, a, 0, Shape(0, 0, 1, 1000)) in ((1,), (2,))
        assert devices_on(policy, a, 0, Shape(0, 0, 2, 1000)) == (1, 2)
    full = arrays([500, 999])
    assert not full.fit_mask(Shape(0, 0, 1, 1000), np.arange(1)).any()


def test_a_share_goes_to_the_fullest_device_that_fits_under_best_fit() -> None:
    a = arrays([1000, 300, 600])
    assert devices_on("bestfit", a, 0, Shape(0, 0, 1, 250)) == (1,)
    assert devices_on("bestfit", a, 0, Shape(0, 0, 1, 500)) == (2,)
    assert devices_on("firstfit", a, 0, Shape(0, 0, 1, 250)) == (0,)


def test_model_constraints_are_respected() -> None:
    a = arrays([1000], [1000], [1000], models=["P100", "V100M16", "T4"])
    shape = Shape(0, 0, 1, 500, frozenset({"V100M16", "V100M32"}))
    assert a.fit_mask(shape, np.arange(3)).tolist() == [False, True, False]
    for policy in POLICIES:
        b = arrays([1000], [1000], [1000], models=["P100", "V100M16", "T4"])
        assert place(policy, b, shape, FragModel(b, [(shape, 1.0)])) == (1, (0,))


def brute_frag(a: GpuArrays, mix: list[tuple[Shape, float]], node: int, free: np.ndarray, cpu: int) -> float:
    total = 0.0
    for s, p in mix:
        ok = (s.models is None or a.model_names[a.model[node]] in s.models) and s.count > 0
        ok = ok and (free >= s.milli).sum() >= s.count and cpu >= s.cpu
        total += p * (free[free < s.milli].sum() if ok else free.sum())
    return total


def test_fragmentation_growth_matches_the_definition() -> None:
    rng = np.random.default_rng(3)
    a = arrays(
        *[list(rng.choice([0, 190, 530, 770, 1000], size=int(rng.choice([2, 4, 8])))) for _ in range(40)], cpu=16_000
    )
    a.cpu[:] = rng.integers(0, 16_000, size=a.size)
    shapes = [
        Shape(4000, 0, 1, 1000),
        Shape(2000, 0, 1, 470),
        Shape(8000, 0, 8, 1000),
        Shape(1000, 0, 1, 230),
        Shape(6000, 0, 2, 1000),
    ]
    mix = [(s, p) for s, p in zip(shapes, (0.4, 0.3, 0.05, 0.15, 0.1), strict=True)]
    frag = FragModel(a, mix)
    everyone = np.arange(a.size)
    for shape in shapes + [Shape(3000, 0, 0, 0)]:
        fits = everyone[a.fit_mask(shape, everyone)]
        growth, device = frag.growth(shape, fits)
        for j, n in enumerate(fits):
            before = brute_frag(a, mix, n, a.free[n], a.cpu[n])
            assert frag.frag[n] == pytest.approx(before)
            if shape.is_share:
                options = []
                for d in np.flatnonzero(a.free[n] >= shape.milli):
                    f = a.free[n].copy()
                    f[d] -= shape.milli
                    options.append(brute_frag(a, mix, n, f, a.cpu[n] - shape.cpu))
                assert growth[j] == pytest.approx(min(options) - before)
                f = a.free[n].copy()
                f[device[j]] -= shape.milli
                assert brute_frag(a, mix, n, f, a.cpu[n] - shape.cpu) == pytest.approx(min(options))
            else:
                f = a.free[n].copy()
                for d in devices_on("fgd", a, n, shape):
                    f[d] -= shape.milli
                assert growth[j] == pytest.approx(brute_frag(a, mix, n, f, a.cpu[n] - shape.cpu) - before)


def gpu_pod(name: str, gpu: str, annotations: dict[str, str] | None = None, node: str = "", **kw: object) -> dict:
    pod = pod_object(name, gpu=gpu, **kw)  # type: ignore[arg-type]
    pod["metadata"].setdefault("annotations", {}).update(annotations or {})
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


def test_bound_pods_hold_the_cards_their_annotation_names_and_bind_annotations_name_the_choice() -> None:
    node = node_from_object(node_object("n1", gpu=4, labels={"nvidia.com/gpu.product": "T4"}))
    held = task_from_pod(gpu_pod("a", "600m", {GPU_INDEX: "2"}, node="n1"))
    whole = task_from_pod(gpu_pod("b", "1", {GPU_INDEX: "0"}, node="n1"))
    node.add_task(held)
    node.add_task(whole)
    state, holders = node_state([node])
    assert state.free[0].tolist() == [0, 1000, 400, 1000]
    assert holders[held.key][2] == (2,)
    share = task_from_pod(gpu_pod("c", "300m"))
    cards, notes = bind_annotations(share, node, state, 0, now_ns=1_700_000_000_000_000_000, policy="bestfit")
    assert cards == (2,) and notes == {GPU_INDEX: "2", PREDICATE_TIME: "1700000000000000000"}
    two = task_from_pod(gpu_pod("d", "2"))
    assert bind_annotations(two, node, state, 0, now_ns=5) == ((1, 3), {GPU_INDEX: "1,3", PREDICATE_TIME: "5"})
    three = task_from_pod(gpu_pod("e", "3"))
    assert bind_annotations(three, node, state, 0, now_ns=5) is None
    picky = task_from_pod(gpu_pod("f", "1", {"volcano-py.io/gpu-spec": "V100M16|V100M32"}))
    assert bind_annotations(picky, node, state, 0, now_ns=5) is None
    cpu_only = task_from_pod(pod_object("g"))
    assert bind_annotations(cpu_only, node, state, 0, now_ns=5) == ((), {})


def test_volcano_gpu_memory_requests_share_one_card_by_memory() -> None:
    node = node_from_object(node_object("n1", extra={"volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "32768"}))
    state, _ = node_state([node])
    pod = pod_object("m", gpu=0)
    pod["spec"]["containers"][0]["resources"]["requests"]["volcano.sh/gpu-memory"] = "4096"
    cards, notes = bind_annotations(task_from_pod(pod), node, state, 0, now_ns=1, policy="bestfit")
    assert cards == (0,) and notes[GPU_INDEX] == "0"
    big = pod_object("big", gpu=0)
    big["spec"]["containers"][0]["resources"]["requests"]["volcano.sh/gpu-memory"] = "20000"
    assert bind_annotations(task_from_pod(big), node, state, 0, now_ns=1) is None


CONF = textwrap.dedent("""
    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
      - name: predicates
      - name: deviceshare
        arguments:
          deviceshare.policy: {policy}
""")


@dataclass(frozen=True)
class Case:
    name: str
    policy: str


CASES = [
    Case("FGD-next (the default) keeps shares off the whole free node", "fgd-next"),
    Case("FGD-blend keeps shares off the whole free node", "fgd-blend"),
    Case("FGD-weighted keeps shares off the whole free node", "fgd-weighted"),
    Case("best-fit keeps shares off the whole free node", "bestfit"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_plugin_tracks_cards_inside_one_cycle(case: Case) -> None:
    conf = conf_from_text(CONF.format(policy=case.policy), source="test")
    c = cluster().node("big", gpu=8).node("small", gpu=2)
    for i in range(3):
        c.sim.add_pod(gpu_pod(f"s{i}", "600m"))
    c.cycle(conf)
    nodes = [c.sim.pods[f"default/s{i}"].manifest["spec"].get("nodeName") for i in range(3)]
    assert all(nodes), nodes
    assert nodes.count("small") <= 2  # two 600m shares fill both cards of `small`; a third cannot fit there
