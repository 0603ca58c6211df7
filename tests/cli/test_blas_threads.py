"""The command line loads numpy with one OpenBLAS thread (scheduler/cli/__init__.py), unless the user chose a
number: the threads the process has once numpy is loaded show which."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "import os, scheduler.cli, numpy; print(len(os.listdir('/proc/self/task')))"


def threads_after_numpy(env_value: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_one_blas_thread_by_default_and_the_users_choice_kept() -> None:
    # OpenBLAS starts (its thread count - 1) workers beside the main thread, at most one per core; left to itself
    # it takes every core.
    chosen = min(2, len(os.sched_getaffinity(0)))
    assert (threads_after_numpy(None), threads_after_numpy("2")) == (1, chosen)
