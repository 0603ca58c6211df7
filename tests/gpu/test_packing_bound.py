"""The offline upper bound of the openb packing benchmark (bench/packing_bound.py): valid (never below what an
exact solver or any policy places on small samples), and tighter than the trivial min(requested, capacity)."""

from __future__ import annotations

import importlib
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.cli import bench_module, main as volcano_py

packing = bench_module("packing")  # puts bench/ on sys.path
bound_module = importlib.import_module("packing_bound")
ConfigurationLP, Kind, NodeType = bound_module.ConfigurationLP, bound_module.Kind, bound_module.NodeType
exact_optimum, fs_dff, DFF_LEVELS = bound_module.exact_optimum, bound_module.fs_dff, bound_module.DFF_LEVELS
Node, Shape = packing.Node, packing.Shape


def bound_of(nodes: list[NodeType], pods: list[Kind]) -> float:
    return float(ConfigurationLP.of_nodes(nodes).bound(Counter(pods)).gpu_milli)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 1000), max_size=12).filter(lambda fill: sum(fill) <= 1000))
def test_every_device_fill_keeps_each_dual_feasible_sum_within_the_device(fill: list[int]) -> None:
    for k in DFF_LEVELS:
        assert sum(fs_dff(m, k) for m in fill) <= k * 1000


def test_three_four_tenths_shares_on_one_device_are_bounded_to_two() -> None:
    # 3 x 400 milli ask 1,200 of a 1,000-milli device: any two fit (800), three never do.
    node = NodeType(cpu=8000, memory=8192, devices=1, model="T4")
    assert bound_of([node], [Kind(1000, 100, 1, 400)] * 3) == 800


def test_a_node_short_of_cpu_for_its_gpus_is_bounded_below_its_devices() -> None:
    # 16 cores and 2 GPUs; each pod asks 1 GPU and 12 cores: one pod per node, whatever the order.
    node = NodeType(cpu=16000, memory=65536, devices=2, model="P100")
    pods = [Kind(12000, 1024, 1, 1000)] * 4
    assert bound_of([node, node], pods) == 2000  # the trivial bound says min(4,000, 4,000)


def test_a_pod_goes_only_to_the_models_it_names() -> None:
    t4, v100 = NodeType(32000, 65536, 2, "T4"), NodeType(32000, 65536, 2, "V100")
    pods = [Kind(1000, 1024, 1, 1000, frozenset({"V100"}))] * 4
    assert bound_of([t4, v100], pods) == 2000


SHAPES = [  # (cpu, count, milli): whole GPUs, shares of several sizes, a two-GPU pod, a CPU-only pod
    (2000, 1, 1000), (4000, 2, 1000), (1000, 1, 500), (1000, 1, 300), (1500, 1, 700), (1000, 1, 250),
    (6000, 1, 1000), (500, 0, 0),
]


def small_cluster(rng: random.Random) -> list[Node]:
    return [Node(f"n{i}", rng.choice([8000, 16000, 32000]), 65536, rng.choice([1, 2, 4]), rng.choice(["A", "B"]))
            for i in range(rng.randint(2, 3))]


def small_pods(rng: random.Random) -> list[Shape]:
    out = []
    for cpu, count, milli in rng.sample(SHAPES, 5):
        models = frozenset({rng.choice(["A", "B"])}) if count and rng.random() < 0.3 else None
        out.append(Shape(cpu, 1024, count, milli, models))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_on_small_samples_the_bound_holds_the_exact_optimum_which_holds_every_policy(seed: int) -> None:
    rng = random.Random(seed)
    nodes, pods = small_cluster(rng), small_pods(rng)
    capacity = sum(n.gpus for n in nodes) * 1000
    submitted = packing.sampled(pods, seed, capacity)
    kinds = [Kind(s.cpu, s.memory, s.count, s.milli, s.models) for s in submitted if s.gpu_milli]
    types = [NodeType(n.cpu, n.memory, n.gpus, n.model) for n in nodes]
    optimum = exact_optimum(types, kinds)
    bound = bound_of(types, kinds)
    assert optimum <= bound + 1e-6 <= min(sum(k.gpu for k in kinds), capacity) + 2e-6
    for policy in ("random", "bestfit", "fgd", "fgd-next"):
        run = packing.run_once(policy, nodes, pods, seed)
        assert len(run.requested) == len(submitted)  # the same pods as the bound's
        assert round(run.allocated[-1] * capacity) <= optimum


def test_bench_packing_prints_the_bound_and_each_policy_distance_to_it(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},16000,65536,2,T4\n" for i in range(3)))
    (tmp_path / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\np0,12000,1024,1,1000,,,,0,0,0\np1,1000,1024,1,400,,,,0,0,0\n")
    args = ["--trace-dir", str(tmp_path), "--policies", "bestfit", "--seeds", "1", "--workers", "1", "--bound"]
    assert volcano_py(["bench", "packing", *args, "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    bound_row = next(line.split() for line in lines if "(bound)" in line)
    policy_row = next(line.split() for line in lines if line.split()[:1] == ["bestfit"])  # the bound table's
    bound_unallocated, unallocated, distance = float(bound_row[2]), float(policy_row[1]), float(policy_row[2])
    assert 0 <= bound_unallocated <= unallocated
    assert distance == pytest.approx(unallocated - bound_unallocated, abs=0.11)
