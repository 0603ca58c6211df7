#!/usr/bin/env python3
"""Where a py-spy profile's time goes: samples of a `py-spy record --format raw` file (collapsed stacks) put into
the parts of the scheduler issue 20 asks about, plus the heaviest functions by inclusive and by own time.

    .venv/bin/python bench/pyspy_summary.py bench/results/peers-...-volcano-py-1000x10000.pyspy.txt [--top 25]

A stack belongs to the first part (in the order below) one of its frames matches, so a bind's JSON encoding
counts as the bind path and a watch event's decoding as the watch.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

# (part, pattern): searched in the stack's frames joined by ";"; the first part that matches takes the sample
PARTS = (
    ("bind path (Binder: the bind requests, their JSON, the fence)", re.compile(r"scheduler/cache/binder\.py")),
    ("status writes and events (PodGroup status, Events)",
     re.compile(r"scheduler/cache/(status_writer|events|publish)\.py")),
    ("list decoding (Watcher._list/_pages: the pages' GET, JSON, parse)",
     re.compile(r"Watcher\._(list|pages)\b|_WorkItem\.run \([^;]*\);Kube\.request_bytes")),
    ("watch decoding (Watcher._watch: the stream, JSON, parse, store)", re.compile(r"Watcher\._watch\b")),
    ("scheduling cycle (snapshot, session, actions, plugins)",
     re.compile(r"scheduler/(framework|actions|plugins|solver|api)/|scheduler/cycle\.py|\.run_once ")),
    ("start-up (imports, conf)", re.compile(r"_find_and_load|importlib")),
)
OTHER = "other (HTTP client internals, threads idle in Python, metrics)"
FRAME = re.compile(r"^(?P<fn>.+?) \((?P<file>[^()]*?):(?P<line>\d+)\)$")


def read(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def short(frame: str) -> str:
    m = FRAME.match(frame)
    if not m:
        return frame
    file = m["file"]
    for marker in ("/scheduler/", "site-packages/", "/lib/python3"):
        if marker in file:
            file = file[file.index(marker) + len(marker):] if marker != "/scheduler/" else file[file.index(marker) + 1:]
            break
    return f"{m['fn']} ({file})"


def summarise(stacks: list[tuple[list[str], int]], top: int) -> str:
    total = sum(c for _, c in stacks) or 1
    parts: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for frames, count in stacks:
        thread = frames[0] if frames and frames[0].startswith(("thread", "process")) else "?"
        threads[thread] += count
        code = [f for f in frames if FRAME.match(f)]
        joined = ";".join(code)
        part = next((name for name, pat in PARTS if pat.search(joined)), OTHER)
        parts[part] += count
        for f in {short(f) for f in code}:
            inclusive[f] += count
        if code:
            own[short(code[-1])] += count
    out = [f"{total} samples", "", "| part | share of samples |", "|---|---|"]
    out += [f"| {name} | {100 * n / total:.1f}% |" for name, n in parts.most_common()]
    out += ["", "| thread | share |", "|---|---|"]
    out += [f"| {name} | {100 * n / total:.1f}% |" for name, n in threads.most_common(8)]
    out += ["", f"Top {top} by inclusive time:", ""]
    out += [f"- {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    out += ["", f"Top {top} by own time:", ""]
    out += [f"- {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    if not args.profile.is_file():
        print(f"pyspy_summary: {args.profile}: no such file", file=sys.stderr)
        return 2
    print(summarise(read(args.profile), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
