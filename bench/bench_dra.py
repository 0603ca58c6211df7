"""DRA allocation for one gang: N pods, each with one claim from a ResourceClaimTemplate asking `--per-pod` GPUs
of a DeviceClass with two CEL selectors, asked of every node (the predicate's question), then placed on the first
node that fits; nodes publish `--devices` GPUs each in one ResourceSlice. Prints the median wall time of the
rounds after the first (the first also evaluates the CEL selectors once per device, which later cycles keep).

    .venv/bin/python bench/bench_dra.py --nodes 1000 --devices 8 --pods 64
"""

from __future__ import annotations

import argparse
import statistics
import time

from scheduler.api.dra import (
    EXACT_COUNT,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    PodClaim,
    PodClaims,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scheduler.dra.allocator import Allocator, PodRef
from scheduler.dra.cel import Selectors

DRV = "gpu.nvidia.com"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--pods", type=int, default=64)
    ap.add_argument("--per-pod", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    slices = [ResourceSlice(f"n{n}-gpus", DRV, f"n{n}", 1, 1, node_name=f"n{n}", devices=tuple(
        Device(f"gpu-{i}", {DRV: {"type": "gpu", "index": i, "productName": "H100"}}, {DRV: {"memory": 80 * 2**30}})
        for i in range(args.devices))) for n in range(args.nodes)]
    classes = [DeviceClass("gpu.nvidia.com",
                           (f'device.driver == "{DRV}"', f'device.attributes["{DRV}"].type == "gpu"'))]
    templates = [ResourceClaimTemplate("default", "gpus", ClaimSpec((
        DeviceRequest("gpu", "gpu.nvidia.com", (), EXACT_COUNT, args.per_pod),)))]
    claims = PodClaims((PodClaim("gpu", template="gpus"),))
    selectors = Selectors()
    times = []
    for _ in range(args.repeat + 1):
        start = time.perf_counter()
        trial = Allocator(slices, classes, [], templates, selectors=selectors).tentative()
        for p in range(args.pods):
            pod = PodRef("default", f"w{p}", f"uid-w{p}")
            fitting = [f"n{n}" for n in range(args.nodes) if trial.fits(pod, claims, f"n{n}", {}) == ()]
            if not fitting or trial.place(pod, claims, fitting[0], {}):
                raise SystemExit(f"pod {p} found no node")
        times.append(time.perf_counter() - start)
    print(f"{args.pods} pods x {args.nodes} nodes x {args.devices} devices: first {times[0] * 1000:.0f} ms "
          f"(CEL once per device), then median {statistics.median(times[1:]) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
