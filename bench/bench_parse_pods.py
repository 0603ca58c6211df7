"""What reading pods costs the parse cache (scheduler/cache/parse.py `ParseCache.preparse`), per pod: pods of ours
(a gang's members, the request shape known after the first) read in full, the same read light (another active
replica's job), and their bound updates.

    .venv/bin/python bench/bench_parse_pods.py [--pods 20000]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from shardsim.cluster import pod_doc

from scheduler.cache.parse import ParseCache


def doc(i: int, node: str = "", version: str = "") -> dict[str, Any]:
    made = pod_doc(f"p{i}", "volcano-py", {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}, node=node,
                   group="g1")
    made["metadata"].update(namespace="default", uid=f"u{i}", resourceVersion=f"{i}{version}",
                            creationTimestamp="2026-12-06T07:00:00Z")
    return made


def per_pod(parser: ParseCache, docs: list[dict[str, Any]]) -> float:
    start = time.process_time()
    for obj in docs:
        parser.preparse(obj)
    return (time.process_time() - start) / len(docs) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=20_000)
    n = p.parse_args().pods
    for light in (False, True):
        parser = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *_: None)
        parser.light_of = (lambda job: True) if light else None
        pending = per_pod(parser, [doc(i) for i in range(n)])
        bound = per_pod(parser, [doc(i, node="n1", version="b") for i in range(n)])
        print(f"{'light' if light else 'full'}: pending {pending:.1f} us a pod, bound update {bound:.1f} us a pod")


if __name__ == "__main__":
    main()
