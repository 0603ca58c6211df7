"""The scale-out bench's churn (`make bench-shards --churn F`, bench/shardsim/churn.py) and the chaos cluster's pods
of another scheduler: tests of the tool, through the simulated apiserver's store. Each churn step replaces the
share asked of another scheduler's running pods by pods of new names, of the same requests, on the same nodes
(so no node's room ever grows while replicas bind), and the chaos cluster's nodes carry up to the pods asked."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from scheduler.cli import bench_module

bench_module("shards")  # puts bench/ on sys.path for the modules below
from shardsim.chaos import OTHER, load_chaos  # noqa: E402
from shardsim.churn import Churn  # noqa: E402
from shardsim.cluster import Shape, load  # noqa: E402
from shardsim.kinds import all_kinds  # noqa: E402
from shardsim.store import Store  # noqa: E402


def _running(store: Store) -> dict[str, tuple[str, str]]:
    """The other scheduler's running pods: name -> (node, requests as JSON)."""
    out = {}
    for key, entry in store.kind("v1", "pods").objects.items():
        doc: dict[str, Any] = orjson.loads(entry.data)
        spec = doc["spec"]
        if spec.get("schedulerName") == "default-scheduler" and spec.get("nodeName"):
            out[key] = (spec["nodeName"], orjson.dumps(spec["containers"][0]["resources"]).decode())
    return out


def test_a_churn_step_replaces_the_share_asked_on_the_same_nodes_with_the_same_requests() -> None:
    store = Store(all_kinds())
    load(store, Shape(nodes=20, running=200, pending=10, replicas=2, active=True))
    before = _running(store)
    churn = Churn(store, seed=3)
    for step in range(5):
        answer = churn.step(0.05)
        assert answer == {"replaced": 10, "total": 10 * (step + 1)}
    after = _running(store)
    assert len(after) == len(before) == 200
    gone, new = set(before) - set(after), set(after) - set(before)
    assert len(new) == len(gone) and 10 <= len(new) <= 50  # a pod may be replaced twice
    assert all(k.startswith("bench/run-c") for k in new)
    # every node holds as many of those pods, of the same requests, as before: its room never grew
    assert Counter(before.values()) == Counter(after.values())


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan")])
def test_a_churn_step_refuses_a_share_outside_0_to_1(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        Churn(Store(all_kinds())).step(fraction)


def test_the_chaos_cluster_has_up_to_the_other_schedulers_pods_asked_on_each_node() -> None:
    store = Store(all_kinds())
    load_chaos(store, 40, 3, other=3)
    per_node: Counter[str] = Counter()
    for entry in store.kind("v1", "pods").objects.values():
        doc = orjson.loads(entry.data)
        assert doc["spec"]["schedulerName"] == OTHER and doc["spec"]["nodeName"]
        per_node[doc["spec"]["nodeName"]] += 1
    assert max(per_node.values()) <= 3 and sum(per_node.values()) > 40  # a draw per node, 0 to 3
    empty = Store(all_kinds())
    load_chaos(empty, 40, 3)
    assert not empty.kind("v1", "pods").objects  # none unless asked
