"""The differential report: agreement numbers and every difference, with the workload that produced it.

``build`` reads the records run.py wrote (``<run>/<side>/<seed>.json``) and returns the full text (report.md) and
the Markdown section CONFORMANCE.md carries between its differential markers (``rewrite_section``).
"""

from __future__ import annotations

import json
from pathlib import Path

from markdown_section import replace_section

from .outcome import Difference, compare, tally
from .workloads import generate

BEGIN, END = "<!-- differential:begin -->", "<!-- differential:end -->"


def load(run_dir: Path, side: str, seeds: list[int]) -> dict[int, dict]:
    out = {}
    for seed in seeds:
        f = run_dir / side / f"{seed}.json"
        if f.exists():
            out[seed] = json.loads(f.read_text())
    return out


def summarize(volcano: dict[int, dict], volcano_py: dict[int, dict], seeds: list[int]):
    """(tally, differences, missing seeds, seeds with an error) over the seeds both sides recorded cleanly."""
    pairs, missing, errors = [], [], []
    for seed in seeds:
        a, b = volcano.get(seed), volcano_py.get(seed)
        if a is None or b is None:
            missing.append(seed)
        elif "error" in a or "error" in b:
            errors.append(seed)
        else:
            pairs.append((a, b))
    t, diffs = tally(pairs)
    return t, diffs, missing, errors


def _timing(records: dict[int, dict]) -> str:
    secs = sorted(r["seconds"] for r in records.values() if "seconds" in r)
    if not secs:
        return "-"
    return f"mean {sum(secs) / len(secs):.1f}s, median {secs[len(secs) // 2]:.1f}s, max {secs[-1]:.1f}s"


def differences_by_seed(diffs: list[Difference]) -> dict[int, list[Difference]]:
    out: dict[int, list[Difference]] = {}
    for d in diffs:
        out.setdefault(d.seed, []).append(d)
    return out


def confirmations(run_dir: Path, volcano: dict[int, dict], volcano_py: dict[int, dict],
                  diffs: list[Difference]) -> dict[int, dict]:
    """For each differing seed, what the reruns in ``<run>/confirm-*/`` said: how many reran it, in how many the same
    differences came back, and in how many each side repeated its own first outcome (a side that does not is
    timing-sensitive on that workload, and the difference may be noise)."""
    out: dict[int, dict] = {}
    dirs = sorted(d for d in run_dir.glob("confirm-*") if d.is_dir())
    for seed, ds in differences_by_seed(diffs).items():
        first = {(d.subject, d.what) for d in ds}
        c = {"reruns": 0, "reproduced": 0, "volcano_same": 0, "volcano_py_same": 0}
        for d in dirs:
            a, b = load(d, "volcano", [seed]).get(seed), load(d, "volcano-py", [seed]).get(seed)
            if not a or not b or "error" in a or "error" in b:
                continue
            c["reruns"] += 1
            again = {(x.subject, x.what) for x in compare(seed, a["outcome"], b["outcome"])}
            c["reproduced"] += first <= again
            c["volcano_same"] += not compare(seed, volcano[seed]["outcome"], a["outcome"])
            c["volcano_py_same"] += not compare(seed, volcano_py[seed]["outcome"], b["outcome"])
        if c["reruns"]:
            out[seed] = c
    return out


def _confirmation(c: dict | None) -> str:
    if not c:
        return ""
    n = c["reruns"]
    return (f" [rerun {n}x: reproduced {c['reproduced']}/{n}; Volcano repeated itself {c['volcano_same']}/{n}, "
            f"volcano-py {c['volcano_py_same']}/{n}]")


def bound_per_task(wl, pods: list) -> dict[str, str]:
    """For multi-task Jobs: bound pods per task, from the recorded [name, node, phase] of each pod."""
    out = {}
    for g in wl.gangs:
        if g.kind != "job" or len(g.tasks) < 2:
            continue
        counts = {t.name: 0 for t in g.tasks}
        for name, node, phase in pods:
            for t in g.tasks:
                if name.startswith(f"{g.name}-{t.name}-") and node and phase not in ("Succeeded", "Failed"):
                    counts[t.name] += 1
        out[g.key] = " ".join(f"{t}:{n}" for t, n in counts.items())
    return out


def build(run_dir: Path, seeds: list[int], command: str = "make differential") -> tuple[str, str]:
    volcano, volcano_py = load(run_dir, "volcano", seeds), load(run_dir, "volcano-py", seeds)
    t, diffs, missing, errors = summarize(volcano, volcano_py, seeds)
    confirmed = confirmations(run_dir, volcano, volcano_py, diffs)
    lines = [
        "Seeded random workloads (tools/differential/workloads.py: 2-6 kwok nodes, 1-3 queues, 1-5 Volcano Jobs or "
        "bare PodGroups, sometimes one late gang) run under Volcano (vc-scheduler, vc-controller-manager, "
        "vc-webhook-manager) and under volcano-py (scheduler + controllers), each on its own control plane, with "
        "Volcano's CI conf and a 0.5 s schedule period. Compared after settling: per gang, bound or not (bound pods "
        ">= its minimum) and how many pods are bound; per queue, the summed requests of its bound pods. Nodes are "
        "not compared. A difference that a rerun does not reproduce, or where a side did not repeat its own "
        "outcome, is timing-sensitive rather than a disagreement of rules.",
        "",
        f"Command: `{command}`; seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} workloads)" if seeds else "no seeds",
        "",
        f"- workloads compared: {t.workloads}; in full agreement: **{t.workloads_agree}**"
        + (f"; not settled on a side (deadline): {t.unsettled}" if t.unsettled else ""),
        f"- gangs: {t.gangs}; same ready (bound >= minimum): {t.gangs_ready_agree}; same bound count: "
        f"{t.gangs_bound_agree}",
        f"- queues: {t.queues}; same allocated (every resource): {t.queues_agree}",
        f"- time per workload: Volcano {_timing(volcano)}; volcano-py {_timing(volcano_py)}",
    ]
    if missing:
        lines.append(f"- not run on both sides: {len(missing)} ({', '.join(map(str, missing[:20]))})")
    if errors:
        lines.append(f"- failed to run (see the records): {', '.join(map(str, errors))}")
    by_seed = differences_by_seed(diffs)
    detail: list[str] = []
    if by_seed:
        lines += ["", f"Differences ({len(diffs)} in {len(by_seed)} workloads):", ""]
        for seed, ds in by_seed.items():
            what = "; ".join(f"{d.subject} {d.what}: Volcano {d.volcano}, volcano-py {d.volcano_py}" for d in ds)
            lines.append(f"- seed {seed}: {what}{_confirmation(confirmed.get(seed))}")
            detail += ["", f"### seed {seed}", "", "```", *generate(seed).describe(), "```", ""]
            wl = generate(seed)
            for side, recs in (("Volcano", volcano), ("volcano-py", volcano_py)):
                gangs = recs[seed]["outcome"]["gangs"]
                per_task = bound_per_task(wl, recs[seed].get("observed", {}).get("pods", []))
                detail.append(f"- {side}: " + ", ".join(
                    f"{k} {g['bound']}/{g['pods']} bound"
                    + (f" [{per_task[k]}]" if per_task.get(k) else "")
                    + f" (pg {g['podgroup_phase']}" + (f", job {g['job_phase']}" if g["job_phase"] else "") + ")"
                    for k, g in gangs.items()))
            detail.append(f"- rerun: `make differential RERUN={seed}`")
    md = "\n".join(lines)
    text = "# Differential: Volcano vs volcano-py\n\n" + md + "\n" + "\n".join(detail) + "\n"
    return text, md


def rewrite_section(path: Path, body: str) -> None:
    """Replace what is between the differential markers (appending the section when absent)."""
    replace_section(path, f"{BEGIN}\n{body.rstrip()}\n{END}", BEGIN, END,
                    "## Differential: seeded random workloads (tools/differential)")
