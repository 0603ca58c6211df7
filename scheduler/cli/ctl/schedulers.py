"""Layer `ctl`: which schedulerNames the schedulers running in the cluster claim, so that `job run` can say when
no scheduler will ever look at the Job it made (it would wait in Pending, with nothing saying why).

The schedulers are found as their Helm charts label their pods: volcano-py's (`app.kubernetes.io/name=
volcano-py-scheduler`, charts/volcano-py/templates/scheduler.yaml) and Volcano's (`app=volcano-scheduler`,
installer/helm/chart/volcano/templates/scheduler.yaml). A running pod claims each `--scheduler-name` of its
arguments, else its program's default (volcano-py's `volcano-py`, vc-scheduler's `volcano`:
cmd/scheduler/app/options/options.go). A scheduler run outside the cluster (on a laptop, in a test) is not seen:
the message says so. Without the right to list pods there is nothing to say, and nothing is said.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import KubeError
from scheduler.cli.ctl.client import CORE, Client

VOLCANO_PY_DEFAULT = "volcano-py"  # scheduler/flags/components.py: --scheduler-name's default
VOLCANO_DEFAULT = "volcano"
FINDERS = (("app.kubernetes.io/name=volcano-py-scheduler", VOLCANO_PY_DEFAULT),
           ("app=volcano-scheduler", VOLCANO_DEFAULT))


@dataclass(frozen=True, slots=True)
class Claims:
    names: dict[str, list[str]]  # schedulerName -> the pods (namespace/name) that claim it


def names_in_args(args: Iterable[object], default: str) -> list[str]:
    """The `--scheduler-name` values of a command line (Go's `-flag v`, `-flag=v`, `--flag v`, `--flag=v`)."""
    tokens = [str(a) for a in args]
    names = []
    for i, token in enumerate(tokens):
        flag, has_value, value = token.lstrip("-").partition("=")
        if not token.startswith("-") or flag != "scheduler-name":
            continue
        if has_value:
            names.append(value)
        elif i + 1 < len(tokens):
            names.append(tokens[i + 1])
    return names or [default]


def _claims_of(pod: MutableObj, default: str) -> list[str]:
    if (pod.get("status") or {}).get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return []
    names: list[str] = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        names += names_in_args([*(container.get("command") or ()), *(container.get("args") or ())], default)
    return names


def claims(client: Client) -> Claims | None:
    """The names claimed by the scheduler pods found; None when pods may not be listed (or cannot be)."""
    found: dict[str, list[str]] = {}
    for selector, default in FINDERS:
        try:
            pods = client.items(f"{CORE}/pods", {"labelSelector": selector})
        except (KubeError, OSError):
            return None
        for pod in pods:
            meta = pod.get("metadata") or {}
            for name in dict.fromkeys(_claims_of(pod, default)):
                found.setdefault(name, []).append(f"{meta.get('namespace')}/{meta.get('name')}")
    return Claims(found)


def unclaimed_warning(scheduler: str, found: Claims | None, job: str) -> str | None:
    """The warning `job run` prints when no scheduler pod claims `scheduler`; None when one does or we cannot
    tell."""
    if found is None or scheduler in found.names:
        return None
    others = ", ".join(f"{name} ({', '.join(pods)})" for name, pods in sorted(found.names.items()))
    seen = f"the schedulers running claim {others}" if others else "no volcano-py or Volcano scheduler pod runs"
    return (f"warning: no scheduler in the cluster claims schedulerName {scheduler!r} ({seen}): job {job} will wait "
            f"in Pending until one does. Run it with -S NAME for a name a scheduler claims, or start a scheduler "
            f"with --scheduler-name {scheduler} (one run outside the cluster is not seen here)")
