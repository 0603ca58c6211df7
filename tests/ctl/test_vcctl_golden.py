"""volcano-py prints and sends what Volcano's vcctl prints and sends, byte for byte, for the same objects and
command line (issue: vcctl parity).

vcctl_golden.json holds vcctl's own output: tools/vcctl_parity/compare.py ran the vcctl binary built from the
Volcano snapshot against the stand-in apiserver of stub_apiserver.py and recorded its stdout, whether it
succeeded, and the writes it sent. Here volcano-py runs each scenario against the same stand-in. A failing
command is compared on its status and writes only: vcctl says why on stdout, volcano-py in one line on stderr.

One difference is by design (issue 38): `job run` without `-S` names volcano-py's scheduler (`volcano-py`), where
vcctl names Volcano's (`volcano`), so a volcano-py user's first Job is scheduled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stub_apiserver import writes

GOLDEN = json.loads((Path(__file__).parent / "vcctl_golden.json").read_text())
SCENARIOS = GOLDEN["scenarios"]


@pytest.mark.parametrize("case", SCENARIOS, ids=[c["name"] for c in SCENARIOS])
def test_volcano_py_does_what_vcctl_does(
    case: dict[str, Any], vcctl: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in case["files"].items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    run, stub = vcctl(*case["args"], objects=GOLDEN["objects"][case["objects"]])
    assert (run.code == 0) == case["ok"], run.err
    if not case["failure"]:
        assert run.out == case["stdout"]
    else:
        assert len(run.err.splitlines()) == 1, run.err  # one line, no traceback
    assert writes(stub) == expected_writes(case)


def expected_writes(case: dict[str, Any]) -> list[dict[str, Any]]:
    """vcctl's writes, with volcano-py's default scheduler name where `job run` was given no `-S`."""
    if case["args"][:2] != ["job", "run"] or "-S" in case["args"] or "--scheduler" in case["args"]:
        return list(case["writes"])
    out = json.loads(json.dumps(case["writes"]))
    for write in out:
        spec = (write.get("body") or {}).get("spec") or {}
        if spec.get("schedulerName") == "volcano" and "-f" not in case["args"]:
            spec["schedulerName"] = "volcano-py"
    return out
