#!/usr/bin/env python3
"""volcano-py's scheduler with some of its API writes switched off, for `make bench-peers`' information rows
(bench/bench_peers.py, contender `volcano-py-off`): how much of the server's CPU per bind each kind of write costs.
Never a way to run a scheduler users rely on: with events off no pod gets its `Scheduled` event.

    python bench/py_variant.py OFF[,OFF...] scheduler --kubeconfig=...     (the rest: volcano-py's own arguments)

OFF: events (no Event is sent), podgroup-status (no PodGroup status write), protobuf (binds and events as JSON, as
before protobuf bodies), none.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SWITCHES = ("events", "podgroup-status", "protobuf", "none")


def switch_off(parts: set[str]) -> None:
    unknown = parts - set(SWITCHES)
    if unknown:
        raise SystemExit(f"py_variant: unknown switch {sorted(unknown)}; known: {', '.join(SWITCHES)}")
    if "events" in parts:
        from scheduler.cache.events import EventRecorder

        EventRecorder.record = lambda self, *a, **k: None  # type: ignore[method-assign]
    if "podgroup-status" in parts:
        from scheduler.cache.status_writer import StatusWriter

        StatusWriter.write_podgroups = lambda self, *a, **k: None  # type: ignore[method-assign]
    if "protobuf" in parts:
        from scheduler.cache import protobuf

        protobuf.ENABLED = False


def main() -> int:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    switch_off({p for p in sys.argv[1].split(",") if p})
    from scheduler.cli import main as cli_main

    return cli_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
