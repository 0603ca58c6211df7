"""The FGD paper's GPU packing benchmark on the openb trace (issue 10); the same as `volcano-py bench packing`.

    .venv/bin/python bench/bench_packing.py [--variants default|all|a,b] [--policies ...] [--seeds 10] [--out DIR]

Samples pods with replacement (seeded), submits them one by one with no departures until the GPUs requested
reach 130% of the cluster's, and records the allocated GPU share after each pod, per policy, mean of the seeds.
Writes packing_curve.csv, packing_summary.csv and (with matplotlib) one PNG per variant.
"""

from __future__ import annotations

import sys

from scheduler.packing.bench import main

if __name__ == "__main__":
    sys.exit(main())
