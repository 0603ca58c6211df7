"""Replay the differential's workloads on volcano-py's simulator and compare with Volcano's recorded outcomes.

    make differential-sim [RUN=seed1-n200]      (cd tools && ../.venv/bin/python -m differential.simreplay)

The simulator runs the same scheduling code as the scheduler (DESIGN.md section 1), so once `make differential`
has recorded what Volcano did with each workload, a change to the scheduling core can be checked against those
records in about a minute, without a control plane. Each workload is rebuilt in memory (its nodes, queues and
PriorityClasses; Jobs expanded by `scheduler.jobs` with their pods created once the PodGroup leaves Pending, as
the job controller does; bare PodGroups with their pods), every wave is given six cycles of Volcano's CI conf,
and the pods bound per gang are compared with Volcano's record. It is a quick check, not the oracle: the
control-plane run (`make differential`) is what CONFORMANCE.md reports.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from scheduler.cycle import conf_from_text
from scheduler.jobs.expand import podgroup_for, pods_for
from scheduler.testing import ClusterBuilder

from .workloads import Workload, generate

CI_CONF = Path("/work/shared/peers/volcano/installer/helm/chart/volcano/config/volcano-scheduler-ci.conf")
CYCLES_PER_WAVE = 6


def replay(workload: Workload, conf_text: str) -> dict[str, int]:
    """Pods bound per gang key after replaying `workload` in memory."""
    conf = conf_from_text(conf_text, source="volcano-scheduler-ci.conf")
    c = ClusterBuilder()
    sim = c.sim
    values = {pc["metadata"]["name"]: int(pc["value"]) for pc in workload.priority_classes}
    for name, value in values.items():
        sim.add_priority_class(name, value)
    for node in workload.nodes:
        node = copy.deepcopy(node)
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # kwok's node status
        sim.add_node(node)
    if "default" not in sim.queues:
        sim.add_queue({"metadata": {"name": "default"}, "spec": {"weight": 1}})
    for queue in workload.queues:
        sim.add_queue(copy.deepcopy(queue))
    groups: dict[str, str] = {}
    held: list[tuple[str, list[dict[str, Any]]]] = []  # a Job's pods wait for its PodGroup to leave Pending
    for wave in workload.waves():
        for gang in wave:
            for manifest in map(copy.deepcopy, gang.manifests):
                if manifest["kind"] == "Job":
                    manifest["metadata"]["uid"] = f"uid-{gang.name}"
                    podgroup = podgroup_for(manifest, values)
                    groups[gang.key] = sim.add_podgroup(podgroup)
                    held.append((groups[gang.key], pods_for(manifest, podgroup=podgroup["metadata"]["name"])))
                elif manifest["kind"] == "PodGroup":
                    groups[gang.key] = sim.add_podgroup(manifest)
                elif manifest["kind"] == "Pod":
                    sim.add_pod(manifest)
        for _ in range(CYCLES_PER_WAVE):
            c.cycle(conf)
            sim.now += 1
            for item in list(held):
                key, pods = item
                if sim.podgroups[key].manifest["status"].get("phase") not in (None, "Pending"):
                    for pod in pods:
                        sim.add_pod(pod)
                    held.remove(item)
    return {key: len(sim.bound(group)) for key, group in groups.items()}


def volcano_bound(workload: Workload, record: dict[str, Any]) -> dict[str, int]:
    """Pods bound per gang key in Volcano's record of the workload."""
    counts: Counter[str] = Counter()
    for name, node, _phase in record["observed"]["pods"]:
        if node:
            for gang in workload.gangs:
                if name.startswith(f"{gang.name}-"):
                    counts[gang.key] += 1
    return {gang.key: counts.get(gang.key, 0) for gang in workload.gangs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="seed1-n200", help="the differential run whose Volcano records to use")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--conf", type=Path, default=CI_CONF)
    parser.add_argument("--results", type=Path, default=Path.home() / ".cache" / "volcano-py" / "differential")
    args = parser.parse_args(argv)
    records = args.results / args.run / "volcano"
    if not records.is_dir() or not args.conf.is_file():
        print(f"simreplay: need Volcano's records in {records} (make differential) and the conf {args.conf}",
              file=sys.stderr)
        return 2
    conf_text = args.conf.read_text()
    compared = agreed = 0
    for seed in range(args.seed, args.seed + args.workloads):
        path = records / f"{seed}.json"
        if not path.is_file():
            continue
        workload = generate(seed)
        theirs, ours = volcano_bound(workload, json.loads(path.read_text())), replay(workload, conf_text)
        compared += 1
        if theirs == ours:
            agreed += 1
        else:
            diff = {k: (theirs.get(k), ours.get(k)) for k in theirs if theirs.get(k) != ours.get(k)}
            print(f"seed {seed}: (Volcano, volcano-py on the simulator) {diff}")
    print(f"{agreed} of {compared} workloads agree (pods bound per gang)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
