"""What a scheduler's start imports: a restart's first bind waits for the imports (BENCHMARKS.md, restart to
first bind), so what only some clusters use is loaded when first used: the CEL runtime (and protobuf under it) on
the first DRA selector compiled (scheduler/dra/cel.py), and not the Job controller's package at all."""

from __future__ import annotations

import json
import subprocess
import sys

# The modules `volcano-py scheduler` imports before its first cycle (scheduler/cli/__init__.py `cmd_scheduler`,
# `_run_scheduler`), with the default conf's actions and plugins built.
PROBE = """
import json, sys
import scheduler.cli
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.runner import SchedulerLoop
from scheduler.cycle import load_conf
import scheduler.plugins.registry
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("cel_expr_python", "google")
                        or m == "scheduler.jobs" or m.startswith("scheduler.jobs."))))
"""

CEL = """
import json, sys
from scheduler.dra.cel import Selectors
s = Selectors()
before = "cel_expr_python" in sys.modules
problem = s.problem('device.driver == "gpu.example.com"')
print(json.dumps([before, "cel_expr_python" in sys.modules, problem, s.problem("device.driver ==")[:16]]))
"""


def run(code: str) -> object:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_scheduler_start_loads_neither_the_cel_runtime_nor_the_job_controller() -> None:
    assert run(PROBE) == []


def test_the_cel_runtime_is_loaded_by_the_first_selector_and_compiles_as_before() -> None:
    assert run(CEL) == [False, True, "", "does not compile"]
