"""`volcano-py conf check`: what a volcano-scheduler.conf would use, skip and reject, as text or JSON, and the
checks of the actions' `configurations:` arguments, which the conf loader keeps as written.

An action reads its arguments when it runs and falls back to its default on a value it cannot read (Volcano's
`Arguments.GetInt`/`GetBool` do the same: pkg/scheduler/framework/arguments.go), so a misspelt key or a bad value
would go unnoticed. Each is a warning here naming the action, the key, and the value the action uses instead.
The keys are those Volcano's actions read (pkg/scheduler/actions/*/*.go: `GetArgOfActionFromConf`) and
volcano-py's own (`starvationThresholdSeconds`, `maxBindsPerCycle`); `ACTION_ARGS` lists them with the reading
each action applies (scheduler/actions/starvation.py, allocate.py, gang_evict.py, preempt.py, consolidate.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scheduler.actions.allocate import MAX_BINDS, MAX_BINDS_TOP
from scheduler.actions.consolidate import (
    BOUNDS as CONSOLIDATE_BOUNDS,
    MAX_LOST as CONSOLIDATE_MAX_LOST,
    MAX_LOST_TOP as CONSOLIDATE_MAX_LOST_TOP,
)
from scheduler.actions.starvation import parse_hold_idle, parse_threshold
from scheduler.framework.conf import ConfError, SchedulerConf, describe_conf
from scheduler.framework.conf_args import as_bool, whole_number
from scheduler.framework.conf_values import closest
from scheduler.framework.conf_yaml import MAX_CONF_BYTES

UNSUPPORTED = "not supported by volcano-py"
Reader = Callable[[Any], Any]  # the value as the action reads it; raises ValueError when it cannot


def _bool(raw: Any) -> bool:
    value = as_bool(raw)
    if value is None:
        raise ValueError
    return value


def _count(low: int, high: int) -> Reader:
    def read(raw: Any) -> int:
        return whole_number(raw, low, high)  # as the actions read it (gang_evict.py, consolidate.py)

    return read


@dataclass(frozen=True, slots=True)
class ArgSpec:
    read: Reader
    default: Any
    expects: str  # what a good value is, in words
    honoured: bool = True  # False: Volcano's argument, which volcano-py accepts and does not read


_CACHE = ArgSpec(_bool, True, "true or false")
_VOLCANO_CACHE = ArgSpec(_bool, True, "true or false", honoured=False)
_GANG = {"maxDomains": ArgSpec(_count(1, 1_000_000), 8, "a whole number from 1 to 1000000"),
         "allowWholeBundle": ArgSpec(_bool, True, "true or false")}
_INT = ArgSpec(_count(0, 1 << 31), None, "a whole number >= 0", honoured=False)

ACTION_ARGS: Mapping[str, Mapping[str, ArgSpec]] = {
    "enqueue": {},
    "allocate": {"predicateErrorCacheEnable": _CACHE,
                 "starvationThresholdSeconds": ArgSpec(parse_threshold, 300.0,
                                                       "a duration such as 5m or a number of seconds (negative: off)"),
                 "starvationHoldIdle": ArgSpec(parse_hold_idle, "off",
                                               "a duration from 0s to 168h such as 1h, or true (1h) or false"),
                 MAX_BINDS: ArgSpec(_count(1, MAX_BINDS_TOP), "no bound", f"a whole number from 1 to {MAX_BINDS_TOP}")},
    "backfill": {"predicateErrorCacheEnable": _VOLCANO_CACHE},
    "reclaim": {"predicateErrorCacheEnable": _VOLCANO_CACHE},
    "preempt": {"predicateErrorCacheEnable": _VOLCANO_CACHE,
                "enableTopologyAwarePreemption": ArgSpec(_bool, False, "true or false"),
                "topologyAwarePreemptWorkerNum": _INT, "minCandidateNodesPercentage": _INT,
                "minCandidateNodesAbsolute": _INT, "maxCandidateNodesAbsolute": _INT},
    "gangpreempt": _GANG,
    "gangreclaim": _GANG,
    "consolidate": {**{key: ArgSpec(_count(1, top), default, f"a whole number from 1 to {top}")
                       for key, (default, top) in CONSOLIDATE_BOUNDS.items()},
                    CONSOLIDATE_MAX_LOST: ArgSpec(_count(1, CONSOLIDATE_MAX_LOST_TOP), "no bound",
                                                  f"a whole number of GPU-hours from 1 to {CONSOLIDATE_MAX_LOST_TOP}")},
}


@dataclass(frozen=True, slots=True)
class ArgWarning:
    """An action argument the action will not use as written."""

    action: str
    key: str
    value: Any
    problem: str  # "unknown argument" or what a good value is
    suggestion: str  # the key that was probably meant ("" if none)
    using: str  # what the action uses instead, in words

    def render(self) -> str:
        where = f"configurations ({self.action})"
        if self.problem == UNSUPPORTED:
            return f"{where} argument {self.key!r}: not supported by volcano-py; ignored: {self.using}"
        if self.problem == "unknown argument":
            hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
            return f"{where} argument {self.key!r}: not an argument of {self.action}{hint}; ignored: {self.using}"
        return f"{where} argument {self.key!r}: {self.value!r} is not {self.problem}; ignored: {self.using}"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return str(value)


def action_warnings(conf: SchedulerConf) -> list[ArgWarning]:
    warnings = []
    for action, arguments in conf.configurations.items():
        specs = ACTION_ARGS.get(action, {})
        for key, value in arguments.items():
            spec = specs.get(key)
            if spec is None:
                meant = closest(key, specs) or ""
                using = (f"{action} uses {meant}={_shown(specs[meant].default)} (the default)" if meant
                         and specs[meant].default is not None else f"{action} runs without it")
                warnings.append(ArgWarning(action, key, value, "unknown argument", meant, using))
                continue
            if not spec.honoured:  # as the loader says of a plugin argument volcano-py does not read
                warnings.append(ArgWarning(action, key, value, UNSUPPORTED, "",
                                           f"volcano-py's {action} does not read it (Volcano's does)"))
                continue
            try:
                spec.read(value)
            except (ValueError, TypeError):
                warnings.append(ArgWarning(action, key, value, spec.expects, "",
                                           f"{action} uses {_shown(spec.default)} (the default)"))
    return warnings


@dataclass(frozen=True, slots=True)
class Checked:
    conf: SchedulerConf
    arg_warnings: tuple[ArgWarning, ...]

    @property
    def warnings(self) -> list[str]:
        return [*self.conf.skipped, *(w.render() for w in self.arg_warnings)]


def only_comments(path: str) -> None:
    """A file of comments alone (or blank lines) is said as such, not as a conf of the wrong type."""
    import yaml

    try:
        if Path(path).stat().st_size > MAX_CONF_BYTES:
            return  # the loader says what is wrong with it
        text = Path(path).read_text(encoding="utf-8")
        empty = text.strip() != "" and yaml.safe_load(text) is None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # the loader says what is wrong with it, in its words
    if empty:
        raise ConfError(path, "", 'the file holds only comments; expected `actions:` and `tiers:`, e.g. actions: '
                                  '"enqueue, allocate, backfill"')


def check(path: str | None) -> Checked:
    from scheduler.cycle import load_conf_or_default

    if path:
        only_comments(path)
    conf = load_conf_or_default(path)
    return Checked(conf, tuple(action_warnings(conf)))


def render_text(checked: Checked) -> str:
    """describe_conf's lines, its warnings section holding the action arguments' warnings too."""
    lines = describe_conf(checked.conf).rstrip("\n").split("\n")
    cut = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("warnings"))
    warnings = checked.warnings
    tail = [f"warnings ({len(warnings)}):", *(f"  - {w}" for w in warnings)] if warnings else ["warnings: none"]
    return "\n".join([*lines[:cut], *tail]) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def render_json(checked: Checked) -> str:
    conf = checked.conf
    doc = {
        "source": conf.source,
        "notes": list(conf.notes),
        "actions": list(conf.actions),
        "tiers": [[{"name": p.name, "arguments": _plain(p.arguments),
                    "off": sorted(k for k, v in p.switches.items() if not v)} for p in tier.plugins]
                  for tier in conf.tiers],
        "configurations": _plain(conf.configurations),
        "warnings": checked.warnings,
        "argumentWarnings": [_plain(asdict(w)) for w in checked.arg_warnings],
    }
    return json.dumps(doc, indent=2, default=str) + "\n"
