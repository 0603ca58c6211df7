"""`--controllers` of `volcano-py controllers`, read as Volcano's controller-manager reads it. Layer: flags.

Syntax and rule (cmd/controller-manager/app/options/options.go `checkControllers`, default `*,-sharding-controller`;
cmd/controller-manager/app/server.go `isControllerEnabled`): a comma-separated list of `*`, `name`, `+name` and
`-name`; a name may appear once (with any prefix), else the command is refused. A controller is on when the first
entry naming it says `name` or `+name`, off when it says `-name`; a controller no entry names is on when the list
has `*`; an empty list turns every controller on.

volcano-py runs some of Volcano's controllers as one: the job, queue and gc controllers (and the Commands they
carry out) cannot be turned off alone, and JobFlows and JobTemplates are kept by one controller, off only when
both are. The sharding controller is off unless the list turns it on (by default, as in Volcano). Asking for
what volcano-py cannot do is a warning naming it, never an error; the colocation-config controller, which
volcano-py does not have, is said only when the list names it to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.flags.syntax import FlagError

DEFAULT_CONTROLLERS = ("*", "-sharding-controller")

# Volcano's controllers (each Name()); the ones volcano-py can turn off alone, and the others.
HYPERNODE, CRONJOB, PODGROUP = "hyperNode-controller", "cronjob-controller", "pg-controller"
JOBFLOW, JOBTEMPLATE = "jobflow-controller", "jobtemplate-controller"
ALWAYS_ON = ("job-controller", "queue-controller", "gc-controller")
SHARDING = "sharding-controller"
NOT_IN_VOLCANO_PY = ("colocation-config-controller",)
KNOWN = (CRONJOB, "gc-controller", HYPERNODE, "job-controller", JOBFLOW, JOBTEMPLATE, PODGROUP, "queue-controller",
         SHARDING, *NOT_IN_VOLCANO_PY)


@dataclass(frozen=True, slots=True)
class ControllerGates:
    """The `--controllers` list, checked."""

    items: tuple[str, ...] = DEFAULT_CONTROLLERS

    def enabled(self, name: str) -> bool:
        if not self.items:
            return True
        star = False
        for item in self.items:
            if item in (name, f"+{name}"):
                return True
            if item == f"-{name}":
                return False
            star = star or item == "*"
        return star

    @property
    def volcano_py(self) -> frozenset[str]:
        """The controllers volcano-py runs, by Volcano's names: the always-on ones, and each of the others that
        the list turns on (the JobFlow controller when either of its two names is on)."""
        on = {name for name in (HYPERNODE, CRONJOB, PODGROUP, SHARDING) if self.enabled(name)}
        if self.enabled(JOBFLOW) or self.enabled(JOBTEMPLATE):
            on |= {JOBFLOW, JOBTEMPLATE}
        return frozenset({*ALWAYS_ON, *on})

    def warnings(self) -> tuple[str, ...]:
        """One line per request volcano-py does not carry out as asked."""
        out = []
        for name in ALWAYS_ON:
            if not self.enabled(name):
                out.append(f"--controllers: {name} cannot be turned off in volcano-py (the job, queue and gc "
                           "controllers run as one): it runs")
        if self.enabled(JOBFLOW) != self.enabled(JOBTEMPLATE):
            off = JOBTEMPLATE if self.enabled(JOBFLOW) else JOBFLOW
            out.append(f"--controllers: {off} runs: volcano-py's JobFlow controller keeps JobFlows and JobTemplates "
                       "and is off only when both are")
        for name in NOT_IN_VOLCANO_PY:  # asked for by name (under '*' alone, as by default, nothing is said)
            if any(item in (name, f"+{name}") for item in self.items):
                out.append(f"--controllers: volcano-py has no {name}")
        for item in self.items:
            bare = item.lstrip("+-")
            if item != "*" and bare not in KNOWN:
                out.append(f"--controllers: {item!r} names no controller (known: {', '.join(KNOWN)})")
        return tuple(out)


def parse_controller_gates(items: Sequence[str]) -> ControllerGates:
    """FlagError for a name given twice (options.go checkControllers: never both `-name` and `+name`/`name`)."""
    seen: set[str] = set()
    for item in items:
        if item == "*":
            continue
        bare = item[1:] if item[:1] in "+-" else item
        if bare in seen:
            raise FlagError(f"--controllers: {item} cannot have both '-' and '+' prefixes (a controller is named "
                            "once)", flag="controllers")
        seen.add(bare)
    return ControllerGates(tuple(items))
