"""Run every example Job of the Volcano snapshot on volcano-py's simulator with Volcano's CI conf.

    .venv/bin/python tools/volcano_examples.py [--volcano ../shared/peers/volcano] [--write CONFORMANCE.md]

Each example file (with the Queue files beside it, as Volcano's docs apply them) is replayed on a cluster of
4 nodes x 64 cpu, 256Gi, 8 GPUs, and each Job is reported as started (its minAvailable pods running) or not,
with the scheduler's condition. A CronJob's and a JobFlow's Jobs are made by their controllers in the replay (a
JobFlow with the JobTemplates of its directory), over 15 simulated minutes. Files the simulator does not run (Argo
Workflows) and Volcano's deliberately invalid examples are listed with that reason. The
control-plane side of the same check is tests/e2e/test_volcano_examples.py. With --write, the table replaces
the section between `<!-- examples:begin -->` and `<!-- examples:end -->` of the file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from markdown_section import replace_section

from scheduler.cycle import conf_from_text
from scheduler.sim.replay import replay
from scheduler.sim.workload import InputError, load_cluster, load_workload

REPO = Path(__file__).resolve().parent.parent
CLUSTER = {"nodes": [{"name": "n", "count": 4, "cpu": 64, "memory": "256Gi", "gpu": 8}]}
CI_CONF = "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf"
BEGIN, END = "<!-- examples:begin -->", "<!-- examples:end -->"


@dataclass(frozen=True)
class Outcome:
    path: str
    job: str
    started: bool
    detail: str


def example_files(root: Path) -> list[Path]:
    files = []
    for path in sorted((root / "example").rglob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        volcano_job = any(d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith("batch.volcano.sh")
                          for d in docs)
        if volcano_job or any(d.get("kind") in ("CronJob", "JobFlow", "Workflow", "WorkflowTemplate") for d in docs):
            files.append(path)
    return files


def run_file(root: Path, path: Path, conf_text: str, work: Path) -> list[Outcome]:
    rel = str(path.relative_to(root))
    if "invalid_jobs" in path.parts:
        return [Outcome(rel, "-", False, "invalid on purpose: Volcano's webhook denies it (not a runnable example)")]
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    kinds = {str(d.get("kind")) for d in docs}
    if kinds & {"Workflow", "WorkflowTemplate"}:
        return [Outcome(rel, "-", False, "not run: an Argo Workflow, run by Argo's controller, not by a scheduler")]
    beside = ("Queue", "JobTemplate") if "JobFlow" in kinds else ("Queue",)
    queues = [d for q in sorted(path.parent.glob("*.yaml")) if q != path
              for d in yaml.safe_load_all(q.read_text()) if isinstance(d, dict) and d.get("kind") in beside]
    workload = work / "workload.yaml"
    workload.write_text(yaml.safe_dump_all([*queues, *docs]))
    cluster = work / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(CLUSTER))
    try:
        result = replay(load_cluster(cluster), load_workload(workload), conf_from_text(conf_text, source="ci.conf"),
                        horizon=900 if kinds & {"CronJob", "JobFlow"} else 120)
    except InputError as error:
        return [Outcome(rel, "-", False, f"not run: {str(error).split(': ', 1)[-1]}")]
    outcomes = []
    for run in result.runs:
        started = run.started is not None
        condition = result.cluster.condition(run.key.split("/", 1)[1]) if not started else None
        detail = "running" if started else (condition or {}).get("message", "never started")
        outcomes.append(Outcome(rel, run.key, started, str(detail)))
    return outcomes


def table(outcomes: list[Outcome], snapshot: str) -> str:
    started = sum(o.started for o in outcomes)
    lines = [
        BEGIN,
        f"Volcano's examples on the simulator (`python tools/volcano_examples.py --write CONFORMANCE.md`, "
        f"snapshot `{snapshot}`, Volcano's CI conf): {started} of {len(outcomes)} jobs start.",
        "",
        "| example | job | starts | detail |",
        "|---|---|---|---|",
    ]
    for o in outcomes:
        detail = o.detail.replace("|", "\\|")
        lines.append(f"| `{o.path}` | {o.job} | {'yes' if o.started else 'no'} | {detail} |")
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--volcano", default=str(REPO.parent / "shared" / "peers" / "volcano"))
    parser.add_argument("--write", metavar="FILE")
    args = parser.parse_args(argv)
    root = Path(args.volcano)
    if not (root / "example").is_dir():
        print(f"volcano_examples: no Volcano snapshot at {root} (give --volcano)", file=sys.stderr)
        return 2
    conf_text = (root / CI_CONF).read_text()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as work:
        for path in example_files(root):
            outcomes.extend(run_file(root, path, conf_text, Path(work)))
    snapshot = (root / ".release-version").read_text().strip() if (root / ".release-version").exists() else "?"
    section = table(outcomes, snapshot)
    print(section)
    if args.write:
        replace_section(Path(args.write), section, BEGIN, END, "## Volcano's examples on the simulator")
    listed = ("invalid on purpose", "not run:")
    return 0 if all(o.started or o.detail.startswith(listed) for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
