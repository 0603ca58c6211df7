"""Write the generated section of CONFORMANCE.md from the harness's results (<cache>/volcano-py/conformance/).

Only the text between the two markers is rewritten; what is written around them by hand survives. A side or suite
that was not run this time keeps its last results (each row says when it ran).

    python tools/conformance/report.py [--file CONFORMANCE.md] [--command "make conformance"]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from harness import REPO, RESULTS, SIDES, SUITES, parse_ginkgo_json
from markdown_section import replace_section

HERE = Path(__file__).resolve().parent


BEGIN = "<!-- BEGIN GENERATED: tools/conformance/report.py rewrites this section; edit around it -->"
END = "<!-- END GENERATED -->"
FAILED = ("failed", "panicked", "interrupted", "aborted", "timedout")


FOCUSED: set[str] = set()  # suites whose newest focused run stands for the suite (`--focused`)


def _result_dir(side: str, suite: str) -> Path:
    """`<side>/<suite>`, or for a `--focused` suite the newest `<suite>-focus-*` run that finished."""
    if suite in FOCUSED:
        done = [d for d in (RESULTS / side).glob(f"{suite}-focus-*") if (d / "summary.json").exists()]
        if done:
            return max(done, key=lambda d: (d / "summary.json").stat().st_mtime)
    return RESULTS / side / suite


def load(side: str, suite: str) -> dict | None:
    """The run's summary, its specs re-read from ginkgo's report (so a better parser applies to old runs too)."""
    p = _result_dir(side, suite) / "summary.json"
    if not p.exists():
        return None
    summary = json.loads(p.read_text())
    report = p.parent / "report.json"
    if report.exists():
        specs = parse_ginkgo_json(report)
        summary["specs"] = [asdict(s) for s in specs if s.state not in ("skipped", "pending")]
    return summary


def ran(summary: dict) -> list[dict]:
    return [s for s in summary["specs"] if s["state"] not in ("skipped", "pending")]


def cell(summary: dict | None) -> str:
    if summary is None:
        return "not run"
    specs = ran(summary)
    passed = sum(s["state"] == "passed" for s in specs)
    text = f"{passed}/{len(specs)}"
    if summary.get("focus"):
        text += f" (focus `{summary['focus']}`)".replace("|", "\\|")
    if summary.get("error"):
        text += " (harness: " + summary["error"][:80].replace("|", "\\|") + ")"
    return text


def one_line(s: dict) -> str:
    cause = s.get("failure") or s["state"]
    where = f" ({s['location']})" if s.get("location") else ""
    return f"{s['state']}: {cause}{where}".replace("|", "\\|").replace("\n", " ")


def spec_total(summaries: list[dict | None]) -> str:
    counts = {len(ran(s)) for s in summaries if s}
    return "/".join(str(c) for c in sorted(counts)) if counts else "?"


def generate(command: str) -> str:
    out = [BEGIN, ""]
    rows = []
    runs: list[dict] = []
    for suite in SUITES:
        by_side = {side: load(side, suite) for side in SIDES}
        runs += [s for s in by_side.values() if s]
        rows.append(
            f"| {suite} | {spec_total(list(by_side.values()))} | {cell(by_side['volcano'])} | "
            f"{cell(by_side['volcano-py'])} |"
        )
    out += [
        "| suite | specs run | passed by Volcano here | passed by volcano-py |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    keys = sorted({r["snapshot_key"] for r in runs})
    dates = sorted(r["started"] for r in runs)
    out.append(f"Command: `{command}`. Snapshot key: {', '.join(f'`{k}`' for k in keys) or 'none'}. "
               f"Runs between {dates[0] if dates else '-'} and {dates[-1] if dates else '-'} (UTC); "
               f"per-suite wall time: " + ", ".join(f"{r['side']}/{r['suite']} {r['seconds']:.0f}s" for r in runs)
               + ".")
    out.append("")
    out.append("### Passed by Volcano here, not by volcano-py")
    out.append("")
    gaps = 0
    for suite in SUITES:
        vc, py = load("volcano", suite), load("volcano-py", suite)
        if not vc or not py:
            continue
        py_state = {s["name"]: s for s in py["specs"]}
        for s in vc["specs"]:
            other = py_state.get(s["name"])
            if s["state"] == "passed" and (other is None or other["state"] != "passed"):
                gaps += 1
                why = one_line(other) if other else "not run"
                out.append(f"- {suite}: `{s['name']}` - {why}")
        for s in py["specs"]:
            if s["state"] == "passed" and all(v["name"] != s["name"] or v["state"] != "passed" for v in vc["specs"]):
                out.append(f"- {suite}: (the other way round) `{s['name']}` passes on volcano-py only")
    if not gaps:
        out.append("none (among the suites both sides ran)")
    out.append("")
    for side in SIDES:
        out.append(f"### Failures: {side}")
        out.append("")
        any_failure = False
        for suite in SUITES:
            summary = load(side, suite)
            if not summary:
                continue
            fails = [s for s in summary["specs"] if s["state"] in FAILED]
            if not fails:
                continue
            any_failure = True
            out.append(f"**{suite}** ({len(fails)}):")
            out.append("")
            for s in fails:
                name = s["name"].replace("|", "\\|")
                out.append(f"- `{name}` - {one_line(s)}")
            out.append("")
        if not any_failure:
            out.append("none")
            out.append("")
    out.append(END)
    return "\n".join(out)


def rewrite(path: Path, section: str) -> None:
    replace_section(path, section, BEGIN, END, "# Conformance")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", default=str(REPO / "CONFORMANCE.md"))
    p.add_argument("--command", default="make conformance")
    p.add_argument("--focused", action="append", default=[], metavar="SUITE",
                   help="report this suite's newest focused run on each side (e.g. jobseq without the framework "
                   "specs kwok cannot run)")
    args = p.parse_args(argv)
    FOCUSED.update(args.focused)
    rewrite(Path(args.file), generate(args.command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
