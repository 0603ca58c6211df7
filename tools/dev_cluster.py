#!/usr/bin/env python3
"""`make dev-cluster`: a local control plane with fake GPU nodes, running until Ctrl-C.

Layout: node i is in rack i // nodes_per_rack, zone rack // racks_per_zone; the NVLink domain is the rack.
Labels: topology.kubernetes.io/zone=zone-<z>, volcano.sh/rack=rack-<r>, nvidia.com/gpu.clique=nvl-<r>.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time
from pathlib import Path

from controlplane import ControlPlane, create_gpu_node, node_is_ready, wait_for


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--cpu", default="64")
    ap.add_argument("--memory", default="512Gi")
    ap.add_argument("--pods", default="110")
    ap.add_argument("--nodes-per-rack", type=int, default=2)
    ap.add_argument("--racks-per-zone", type=int, default=1)
    ap.add_argument(
        "--kubeconfig", default=".bin/dev-cluster.kubeconfig", help="where to copy the admin kubeconfig"
    )
    ap.add_argument("--no-controller-manager", action="store_true")
    ap.add_argument("--fast", action="store_true", help="disable API priority&fairness and inflight limits")
    args = ap.parse_args(argv)

    cp = ControlPlane(controller_manager=not args.no_controller_manager, fast=args.fast)
    print(f"starting control plane in {cp.dir} ...", flush=True)
    with cp:
        api = cp.api_client()
        names = []
        for i in range(args.nodes):
            rack = i // args.nodes_per_rack
            zone = rack // args.racks_per_zone
            name = f"gpu-node-{i}"
            create_gpu_node(
                api,
                name,
                gpus=args.gpus,
                cpu=args.cpu,
                memory=args.memory,
                pods=args.pods,
                zone=f"zone-{zone}",
                rack=f"rack-{rack}",
                nvlink_domain=f"nvl-{rack}",
            )
            names.append(name)
        for n in names:
            wait_for(lambda n=n: node_is_ready(api, n), 60, what=f"{n} Ready")

        out = Path(args.kubeconfig).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cp.kubeconfig, out)
        out.chmod(0o600)
        kubectl = cp.bin_dir / "kubectl"
        print(
            f"""
control plane ready: {cp.server}
  {args.nodes} fake GPU nodes ({args.gpus} x nvidia.com/gpu, cpu {args.cpu}, memory {args.memory}) via kwok
  kubeconfig (admin, system:masters): {out}
  logs: {cp.logs}

  export KUBECONFIG={out}
  {kubectl} get nodes -L topology.kubernetes.io/zone,volcano.sh/rack,nvidia.com/gpu.clique

  Pods stay Pending until something binds them (no kube-scheduler runs).
  Annotate a running pod with volcano-py.test/complete=Succeeded|Failed (and volcano-py.test/exit-code=N)
  to finish it.  Ctrl-C stops everything.
""",
            flush=True,
        )
        stop = []
        # Explicit handlers: a shell that starts us in the background sets SIGINT to "ignore".
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.append(1))
        try:
            while not stop:
                for name, p in cp.procs.items():
                    if not p.alive():
                        print(
                            f"{name} exited ({p.popen.returncode}); last log lines:\n{p.tail()}", flush=True
                        )
                        return 1
                time.sleep(2)  # liveness watch of the child processes
        except KeyboardInterrupt:
            pass
        print("stopping ...", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
