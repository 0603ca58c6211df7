"""The preemption family's report: agreement, coverage counts against the targets, run time, every difference.

``build`` reads the records run.py wrote (``<run>/<side>/<seed>.json``, ``<run>/<side>/_side.json``) and returns
the full text (report.md) and the Markdown section CONFORMANCE.md carries between this family's own markers
(``rewrite_section``; the random family's section is report.py's).
"""

from __future__ import annotations

import json
from pathlib import Path

from markdown_section import replace_section

from .outcome import Difference
from .preemption import GANG_EVICTION_CONF, MAX_DOMAINS, TARGET_WORKLOADS, TARGETS, generate
from .preemption_outcome import compare, coverage_of, verdict
from .report import differences_by_seed, load

BEGIN, END = "<!-- differential-preemption:begin -->", "<!-- differential-preemption:end -->"
TITLE = "## Differential: gang preemption and reclaim (tools/differential/preemption.py)"


def _pairs(run_dir: Path, seeds: list[int]):
    volcano, volcano_py = load(run_dir, "volcano", seeds), load(run_dir, "volcano-py", seeds)
    pairs, missing, errors = [], [], []
    for seed in seeds:
        a, b = volcano.get(seed), volcano_py.get(seed)
        if a is None or b is None:
            missing.append(seed)
        elif "error" in a or "error" in b:
            errors.append(seed)
        else:
            pairs.append((seed, a, b))
    return volcano, volcano_py, pairs, missing, errors


def differences(run_dir: Path, seeds: list[int]) -> list[Difference]:
    _, _, pairs, _, _ = _pairs(run_dir, seeds)
    out: list[Difference] = []
    for seed, a, b in pairs:
        out += compare(seed, generate(seed), a["outcome"], b["outcome"])
    return out


def _side_time(run_dir: Path, side: str, records: dict[int, dict]) -> str:
    secs = sorted(r["seconds"] for r in records.values() if "seconds" in r)
    if not secs:
        return f"{side}: -"
    # one file per invocation (a run of 200 may be made in chunks): their sum is the side's run time
    chunks = [json.loads(f.read_text()) for f in sorted((run_dir / side).glob("_side*.json"))]
    wall = ""
    if chunks:
        minutes, n = sum(c["seconds"] for c in chunks) / 60, sum(c["workloads"] for c in chunks)
        wall = f", run {minutes:.1f} min for {n} workloads" + (f" in {len(chunks)} chunks" if len(chunks) > 1 else "")
    return (f"{side}: mean {sum(secs) / len(secs):.1f}s, median {secs[len(secs) // 2]:.1f}s, max {secs[-1]:.1f}s "
            f"per workload{wall}")


def _confirmed(run_dir: Path, seed: int, first: set[tuple[str, str]]) -> str:
    dirs = sorted(d for d in run_dir.glob("confirm-*") if d.is_dir())
    n = same = 0
    for d in dirs:
        a, b = load(d, "volcano", [seed]).get(seed), load(d, "volcano-py", [seed]).get(seed)
        if not a or not b or "error" in a or "error" in b:
            continue
        n += 1
        again = {(x.subject, x.what) for x in compare(seed, generate(seed), a["outcome"], b["outcome"])}
        same += first <= again
    return f" [rerun {n}x: reproduced {same}/{n}]" if n else ""


def _side_line(name: str, o: dict) -> str:
    gangs = ", ".join(f"{k} {g['bound']}/{g['pods']} bound" for k, g in o["gangs"].items())
    ev = ", ".join(
        f"{k} -{n}" + (f" {o.get('evicted_tasks', {}).get(k)}" if len(o.get("evicted_tasks", {}).get(k, {})) > 1
                       else "")
        for k, n in o.get("evicted", {}).items()) or "none"
    broken = ", ".join(o.get("broken", [])) or "none"
    return f"- {name}: {gangs}; evicted: {ev}; broken: {broken}"


def build(run_dir: Path, seeds: list[int], command: str = "make differential FAMILY=preemption") -> tuple[str, str]:
    volcano, volcano_py, pairs, missing, errors = _pairs(run_dir, seeds)
    diffs: list[Difference] = []
    agree = 0
    cover = dict.fromkeys(TARGETS, 0)
    unsettled = 0
    watch_errors = []
    for seed, a, b in pairs:
        wl = generate(seed)
        ds = compare(seed, wl, a["outcome"], b["outcome"])
        diffs += ds
        agree += not ds
        unsettled += not (a.get("settled", True) and b.get("settled", True))
        for side, r in (("Volcano", a), ("volcano-py", b)):
            if r["outcome"].get("watch_error"):
                watch_errors.append(f"{seed} ({side})")
    # Coverage is Volcano's: over every workload Volcano's side recorded (a side may have been run alone).
    recorded = [seed for seed in seeds if seed in volcano and "error" not in volcano[seed]]
    for seed in recorded:
        for k, hit in coverage_of(generate(seed), volcano[seed]["outcome"]).items():
            cover[k] += hit
    counts, short = verdict(cover, len(pairs))
    scale = len(recorded) / TARGET_WORKLOADS
    names = {"evicted": "Volcano evicted", "whole_bundle": "a whole bundle (a victim gang broken)",
             "role_minimums": "role minimums decided the safe pods",
             "topology_over_max_domains": f"hard topology, eligible domains > maxDomains ({MAX_DOMAINS})"}
    lines = [
        "Seeded gang-eviction workloads (tools/differential/preemption.py: low-priority gangs fill the nodes, then one "
        "higher-priority gang arrives in the same queue (gangpreempt), in another queue of a capacity setup "
        "(gangreclaim), or with a hard network topology over HyperNodes) run under Volcano and under volcano-py, "
        "each on its own control plane, with Volcano's gang-eviction conf (below) and a 0.5 s schedule period. "
        "Every pod has terminationGracePeriodSeconds 0. A workload agrees when, per gang, bound or not and the "
        "bound count match; per victim job, the pods the scheduler evicted (DisruptionTarget=PreemptionByScheduler, "
        "seen on the pod watch) match, per task where the role rule fixes the split; and the set of broken gangs "
        "(live bound pods fell below minAvailable after an eviction) matches.",
        "",
        f"Command: `{command}`; seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} workloads)" if seeds else "no seeds",
        "",
        f"- workloads compared: {len(pairs)}; in full agreement: **{agree}**"
        + (f" ({100 * agree / len(pairs):.1f}%)" if pairs else "")
        + (f"; not settled on a side (deadline): {unsettled}" if unsettled else ""),
        f"- coverage on Volcano's side, over the {len(recorded)} workloads it ran (target per 200 workloads"
        + (f"; scaled to this run: x{scale:.2f}" if len(recorded) != TARGET_WORKLOADS else "") + "):",
    ]
    for k, target in TARGETS.items():
        lines.append(f"  - {names[k]}: {cover[k]} (target {target}"
                     + (f", scaled {target * scale:.0f}" if len(recorded) != TARGET_WORKLOADS else "") + ")")
    lines.append("- the family " + ("**counts**" if counts else f"**does not count** ({'; '.join(short)})"))
    lines.append(f"- time: {_side_time(run_dir, 'volcano', volcano)}; {_side_time(run_dir, 'volcano-py', volcano_py)}")
    if missing:
        lines.append(f"- not run on both sides: {len(missing)} ({', '.join(map(str, missing[:20]))})")
    if errors:
        lines.append(f"- failed to run (see the records): {', '.join(map(str, errors))}")
    if watch_errors:
        lines.append(f"- pod watch failed (evictions may be undercounted): {', '.join(watch_errors)}")
    by_seed = differences_by_seed(diffs)
    detail: list[str] = []
    if by_seed:
        lines += ["", f"Differences ({len(diffs)} in {len(by_seed)} workloads):", ""]
        for seed, ds in by_seed.items():
            what = "; ".join(f"{d.subject} {d.what}: Volcano {d.volcano}, volcano-py {d.volcano_py}" for d in ds)
            first = {(d.subject, d.what) for d in ds}
            lines.append(f"- seed {seed} ({generate(seed).design.scenario}): {what}"
                         f"{_confirmed(run_dir, seed, first)}")
            detail += ["", f"### seed {seed}", "", "```", *generate(seed).describe(), "```", ""]
            detail.append(_side_line("Volcano", volcano[seed]["outcome"]))
            detail.append(_side_line("volcano-py", volcano_py[seed]["outcome"]))
            detail.append(f"- rerun: `make differential FAMILY=preemption RERUN={seed}`")
    md = "\n".join(lines)
    conf = ["", "The conf (both sides):", "", "```yaml", GANG_EVICTION_CONF.rstrip(), "```"]
    text = "# Differential, preemption family: Volcano vs volcano-py\n\n" + md + "\n" + "\n".join(conf + detail) + "\n"
    return text, md


def rewrite_section(path: Path, body: str) -> None:
    """Replace what is between this family's markers (appending the section when absent)."""
    replace_section(path, f"{BEGIN}\n{body.rstrip()}\n{END}", BEGIN, END, TITLE)
