"""`make bench-shards --openb VARIANT` (bench/shardsim/openb_load.py): the openb trace as the simulated
apiserver's cluster. The pods are the packing benchmark's draw (the same rows, in the same order, for a seed), each
asks for its GPUs as the simulator writes them, and the figure compared, the GPUs the bound pods hold, is counted
from the store."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from scheduler.cli import bench_module

packing = bench_module("packing")
bench_module("shards")  # puts bench/ on sys.path for the package below
from shardsim import openb_load  # noqa: E402
from shardsim.cluster import GPU, NS, check  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.store import Store  # noqa: E402

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n{i},32000,131072,{g},{m}\n" for i, (g, m) in enumerate([(8, "V100M32"), (4, "T4"), (2, "T4"), (2, "P100")]))
ROWS = [(2000, 1, 1000, ""), (1000, 1, 500, "V100M32"), (1000, 1, 300, ""), (4000, 2, 1000, "T4|P100"),
        (500, 0, 0, "")]
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
       "scheduled_time\n" + "".join(f"p{i},{c},1024,{n},{m},{s},,,0,0,0\n" for i, (c, n, m, s) in enumerate(ROWS))


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    return tmp_path


@pytest.mark.parametrize("seed", range(4))
def test_the_pods_are_the_packing_benchmarks_draw(trace: Path, seed: int) -> None:
    store = Store(all_kinds())
    made, plan, docs = openb_load.load(store, 2, variant="default", seed=seed, active=True, trace_dir=trace)
    shapes = packing.load_pods(trace / "openb_pod_list_default.csv")
    drawn = packing.sampled(shapes, seed, 16 * 1000)  # the packing benchmark: 16 GPUs in milli
    assert len(docs) == len(drawn) == made["pending"]
    for doc, shape in zip(docs, drawn, strict=True):
        requests = doc["spec"]["containers"][0]["resources"]["requests"]
        asked = requests.get(GPU)
        if shape.count == 0:
            assert asked is None
        elif shape.count == 1 and shape.milli < 1000:
            assert asked == f"{shape.milli}m"
        else:
            assert asked == str(shape.count)
        assert requests["cpu"] == f"{shape.cpu}m"
        terms = doc["spec"].get("affinity", {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        models = set(terms[0]["matchExpressions"][0]["values"]) if terms else None
        assert models == (set(shape.models) if shape.models else None)
    assert made["gpus"] == 16 and made["gpus_asked"] >= 1.3 * 16
    assert {g.shard for g in plan} <= {0, 1}


def test_the_gpus_allocated_are_what_bound_pods_ask_for(trace: Path) -> None:
    store = Store(all_kinds())
    _, _, docs = openb_load.load(store, 1, variant="default", seed=0, active=True, trace_dir=trace)
    assert openb_load.create(store, docs) == len(docs)
    expected = 0.0
    for doc in docs[:3]:  # bind three pods to the 8-GPU node
        name = doc["metadata"]["name"]
        store.bind(NS, name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": "n0"}})
        gpu = doc["spec"]["containers"][0]["resources"]["requests"].get(GPU, "0")
        expected += float(gpu[:-1]) / 1000 if gpu.endswith("m") else float(gpu)
    got = openb_load.gpus_allocated(store)
    assert got["gpus"] == 16 and got["allocated"] == pytest.approx(expected)
    assert got["share"] == pytest.approx(expected / 16, abs=1e-5)
    assert check(store)["partial_gangs"] == 0
    node = orjson.loads(store.kind("v1", "nodes").objects["n0"].data)
    assert node["metadata"]["labels"][openb_load.MODEL_LABEL] == "V100M32"
