"""The command line loads numpy with one OpenBLAS thread (scheduler/cli.py), unless the user chose a number."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "import os, scheduler.cli, numpy; print(os.environ['OPENBLAS_NUM_THREADS'])"


def threads_seen(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_one_blas_thread_by_default_and_the_users_choice_kept() -> None:
    assert (threads_seen(None), threads_seen("4")) == ("1", "4")
