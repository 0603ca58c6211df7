"""The plots of `bench_gpu_day.py`: wait by gang size, evictions over time, queue shares against their history."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_day_metrics import max_min_fair
from gpu_day_workload import CLASSES, QUEUES

HALF_LIFE_H = 4.0  # the fair-share variants' usage.halfLife, for the history line


def plot_all(results: Sequence[Any], gpus: int, day: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    waits(plt, results, out / "gpu-day-waits.png")
    evictions(plt, results, out / "gpu-day-evictions.png")
    shares(plt, results, gpus, out / "gpu-day-shares.png")


def waits(plt: Any, results: Sequence[Any], path: Path) -> None:
    fig, axes = plt.subplots(1, len(CLASSES), figsize=(12, 4), dpi=100)
    for ax, cls in zip(axes, CLASSES, strict=True):
        names = [r.variant for r in results]
        p50 = [(r.waits[cls].p50 or 0) / 60 for r in results]
        p95 = [(r.waits[cls].p95 or 0) / 60 for r in results]
        x = range(len(results))
        ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
        ax.bar([i + 0.2 for i in x], p95, width=0.4, label="p95")
        ax.set_xticks(list(x), names, rotation=45, ha="right", fontsize=8)
        measured = all(r.waits[cls].measured for r in results)
        ax.set_title(f"{cls} GPU{'s' if cls != '1' else ''}" + ("" if measured else " (not measured)"))
        ax.set_ylabel("queueing delay (min)")
    axes[0].legend()
    fig.suptitle("A day of training jobs: queueing delay by gang size (bench_gpu_day.py)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def evictions(plt: Any, results: Sequence[Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    for r in results:
        hours = range(len(r.evictions_hourly))
        ax.step(list(hours), r.evictions_hourly, where="post",
                label=f"{r.variant}: {r.evicted} pods, {r.lost:.1f} GPU-h lost")
    ax.set_xlabel("hour of the simulated day")
    ax.set_ylabel("pods evicted in the hour")
    ax.set_title("Evictions over time (bench_gpu_day.py)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _history(held: Sequence[float], capacity: float) -> list[float]:
    """Each hour's decayed usage (half-life HALF_LIFE_H) over what holding the whole cluster would give: the
    usage fraction time-based fair share weighs a queue by (api/usage.py; hourly steps here)."""
    factor = math.pow(2.0, -1.0 / HALF_LIFE_H)
    used = norm = 0.0
    out = []
    for value in held:
        used = used * factor + value
        norm = norm * factor + capacity
        out.append(used / norm)
    return out


def shares(plt: Any, results: Sequence[Any], gpus: int, path: Path) -> None:
    shown = [r for r in results if r.variant in ("volcano", "fair-share", "all")] or list(results[:1])
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 3.2 * len(shown)), dpi=100, squeeze=False)
    colours = dict(zip(QUEUES, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
    for ax, r in zip(axes[:, 0], shown, strict=True):
        hours = len(next(iter(r.held.values()), []))
        fair = [max_min_fair({q: r.demand[q][h] for q in r.demand}, float(gpus)) for h in range(hours)]
        for q in QUEUES:
            held = r.held.get(q, [0.0] * hours)
            ax.step(range(hours), [v / gpus for v in held], where="post", color=colours[q], label=f"{q} held")
            ax.step(range(hours), [f.get(q, 0.0) / gpus for f in fair], where="post", color=colours[q], ls="--",
                    lw=0.8)
            ax.plot(range(hours), _history(held, float(gpus)), color=colours[q], ls=":", lw=1.2)
        fm = r.fairness_mean
        ax.set_title(f"{r.variant}: share held (solid), max-min fair share (dashed), usage history "
                     f"(dotted, half-life {HALF_LIFE_H:g} h); fairness {'n/a' if fm is None else f'{fm:.3f}'}",
                     fontsize=9)
        ax.set_ylabel("share of the GPUs")
        ax.set_ylim(0, 1.05)
    axes[-1, 0].set_xlabel("hour of the simulated day")
    axes[0, 0].legend(fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
