"""Run Volcano's `vcctl` and `volcano-py` side by side on the same objects and compare what they print and send.

    python tools/vcctl_parity/compare.py [--vcctl PATH] [--only NAME...] [--record tests/ctl/vcctl_golden.json]

Each scenario of scenarios.py runs twice, each time against a fresh stand-in apiserver
(tests/ctl/stub_apiserver.py, plain HTTP on loopback, no Kubernetes) holding the scenario's objects: once as
`vcctl ARGS --master URL`, once as `volcano-py ARGS --master URL`, both with TZ=UTC and no kubeconfig. Compared:
stdout byte for byte, success or failure, and every write (method, path, body with nulls and empty objects
dropped, as the apiserver stores it). `--record` writes vcctl's side to the file tests/ctl/test_vcctl_golden.py
replays against volcano-py, so the unit tests keep pinning vcctl's bytes without vcctl.

vcctl is the binary `make conformance` builds from the Volcano snapshot (~/.cache/volcano-py/volcano/*/bin/vcctl).
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scenarios import SCENARIOS, Scenario
from stub_apiserver import Stub, serve, writes

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]



def run(command: list[str], scenario: Scenario, workdir: Path) -> dict[str, Any]:
    stub = Stub(scenario.objects)
    server, url = serve(stub)
    try:
        env = {"PATH": os.environ["PATH"], "TZ": "UTC", "HOME": str(workdir), "PYTHONPATH": str(REPO)}
        proc = subprocess.run(
            [*command, *scenario.args, "--master", url],
            capture_output=True,
            text=True,
            cwd=workdir,
            env=env,
            timeout=120,
        )
    finally:
        server.shutdown()
    return {"stdout": proc.stdout, "stderr": proc.stderr, "ok": proc.returncode == 0, "writes": writes(stub)}


def find_vcctl() -> str | None:
    found = sorted(glob.glob(str(Path.home() / ".cache/volcano-py/volcano/*/bin/vcctl")))
    return found[-1] if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vcctl", default=find_vcctl(), help="the vcctl binary")
    p.add_argument("--only", nargs="*", default=None, help="scenario names")
    p.add_argument("--record", help="write vcctl's outputs of the exact scenarios to this JSON file")
    p.add_argument("-v", "--verbose", action="store_true", help="print both outputs of every scenario")
    args = p.parse_args(argv)
    if not args.vcctl:
        print("no vcctl: build it with make conformance, or pass --vcctl", file=sys.stderr)
        return 2
    ours = [sys.executable, "-m", "scheduler.cli"]
    recorded, differ = [], 0
    for scenario in SCENARIOS:
        if args.only and scenario.name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            for name, text in scenario.files.items():
                (workdir / name).write_text(text)
            theirs = run([args.vcctl], scenario, workdir)
            mine = run(ours, scenario, workdir)
        compared = ("ok", "writes") if scenario.failure else ("stdout", "ok", "writes")
        same = {k: theirs[k] == mine[k] for k in compared}
        mark = "same" if all(same.values()) else "DIFFERS in " + ", ".join(k for k, v in same.items() if not v)
        expected = "" if scenario.exact else " (a known difference)"
        print(f"{scenario.name}: {mark}{expected}")
        if not all(same.values()) and scenario.exact:
            differ += 1
        if args.verbose:
            print(theirs["stdout"] or theirs["stderr"], end="")
            print("  writes:", json.dumps(theirs["writes"], sort_keys=True))
        if not all(same.values()):
            if not same.get("stdout", True):
                sys.stdout.writelines(
                    difflib.unified_diff(
                        theirs["stdout"].splitlines(True), mine["stdout"].splitlines(True), "vcctl", "volcano-py"
                    )
                )
            if not same["ok"]:
                print(f"  vcctl ok={theirs['ok']}; volcano-py ok={mine['ok']}")
            if scenario.failure or not same["ok"]:
                print(f"  vcctl: {theirs['stdout'].strip()!r}\n  volcano-py: {mine['stderr'].strip()!r}")
            if not same["writes"]:
                print("  vcctl writes:     ", json.dumps(theirs["writes"], sort_keys=True))
                print("  volcano-py writes:", json.dumps(mine["writes"], sort_keys=True))
        if scenario.exact:
            recorded.append(
                {
                    "name": scenario.name,
                    "args": scenario.args,
                    "objects": scenario.objects,
                    "files": scenario.files,
                    "failure": scenario.failure,
                    "stdout": "" if scenario.failure else theirs["stdout"],
                    "ok": theirs["ok"],
                    "writes": theirs["writes"],
                }
            )
    if args.record:
        sets: dict[str, Any] = {}  # each set of objects once, the scenarios name theirs
        for case in recorded:
            key = json.dumps(case["objects"], sort_keys=True)
            case["objects"] = sets.setdefault(key, f"set-{len(sets)}")
        fixture = {"objects": {name: json.loads(key) for key, name in sets.items()}, "scenarios": recorded}
        Path(args.record).write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(recorded)} scenarios in {args.record}")
    print(f"{differ} exact scenario(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
