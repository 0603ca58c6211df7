"""Layer `framework`: the values a `volcano-scheduler.conf` is read into, the names Volcano has, and the error.

`conf.py` reads a file into these; `conf_args.py` turns one plugin entry's raw `arguments` into the plugin's own
typed value. Everything here is a frozen value; nothing reads a file.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

BUILTIN_SOURCE = "<built-in default>"

# Every action Volcano has registered across releases (pkg/scheduler/actions/factory.go).
VOLCANO_ACTIONS: frozenset[str] = frozenset({
    "enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle",
    "elect", "reserve", "gangpreempt", "gangreclaim", "dequeue",
})

# Every plugin name Volcano has registered across releases (pkg/scheduler/plugins/factory.go, PluginName).
VOLCANO_PLUGINS: frozenset[str] = frozenset({
    "priority", "gang", "conformance", "drf", "predicates", "proportion", "nodeorder", "binpack",
    "overcommit", "sla", "tdm", "task-topology", "numa-aware", "deviceshare", "capacity", "capacity-card",
    "cdp", "rescheduling", "usage", "pdb", "nodegroup", "network-topology-aware", "resource-strategy-fit",
    "extender", "resourcequota", "reservation",
})

# Every switch key Volcano's PluginOption has had, spelled exactly as its yaml tag (pkg/scheduler/conf).
# Most are `enableXxx`; a few are `enabledXxx`, and one release spelled the cluster-order key capitalised.
PLUGIN_SWITCHES: frozenset[str] = frozenset({
    "enableJobOrder", "enableNamespaceOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined",
    "enableTaskOrder", "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder",
    "enabledClusterOrder", "EnabledClusterOrder", "enablePredicate", "enableBestNode", "enableNodeOrder",
    "enableTargetJob", "enableReservedNodes", "enableJobEnqueued", "enabledVictim", "enableJobStarving",
    "enabledOverused", "enabledAllocatable", "enabledHyperNodeOrder", "enabledSubJobReady",
    "enabledSubJobPipelined", "enabledSubJobOrder", "enabledHyperNodeGradient",
})

_SWITCH_PREFIX = re.compile(r"^[Ee]nabled?")


class ConfError(ValueError):
    """A scheduler configuration a person must fix; the message names the file and the field."""

    def __init__(self, source: str, where: str, problem: str) -> None:
        self.source = source
        self.where = where
        self.problem = problem
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


class ArgumentError(ConfError):
    """A plugin argument with a value the plugin cannot use: which plugin, which key, the value, what it wants."""

    def __init__(self, source: str, where: str, plugin: str, key: str, value: Any, expected: str) -> None:
        self.plugin = plugin
        self.key = key
        self.value = value
        self.expected = expected
        super().__init__(source, where, f"plugin {plugin!r} argument {key!r} must be {expected}, got {value!r}")


def _switch_stem(key: str) -> str:
    """`enableJobOrder`, `enabledJobOrder` and `EnabledJobOrder` all name the `JobOrder` switch."""
    return _SWITCH_PREFIX.sub("", key, count=1)


_KNOWN_STEMS: frozenset[str] = frozenset(_switch_stem(key) for key in PLUGIN_SWITCHES)


def closest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """The known name most like `name` (difflib), or "" if none is close: the "did you mean" of every warning."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=cutoff)
    return close[0] if close else ""


class KeyPlace(enum.Enum):
    """Where an ignored key was written."""

    ARGUMENT = "argument"  # under a plugin entry's `arguments`
    SWITCH = "switch"  # an `enableXxx` switch of a plugin entry that the plugin itself reads
    FIELD = "key"  # a key of the conf's own structure: the top level, a tier, a plugin entry, a configuration


class KeyKind(enum.Enum):
    """Why an ignored key is ignored. Volcano ignores every key it does not read (yaml.v2 is not strict, and a
    plugin reads only its own arguments), so none of these is an error."""

    UNSUPPORTED = "unsupported"  # Volcano acts on it; volcano-py does not
    VOLCANO_IGNORES = "volcano-ignores"  # a name Volcano has, with no effect there either on this entry
    UNKNOWN = "unknown"  # a name neither knows: a typo? (with the closest known name, if one is close)
    UNLISTED = "unlisted"  # a per-resource key (`binpack.resources.<name>`) whose resource its listing omits


@dataclass(frozen=True, slots=True)
class KeyWarning:
    """A key of the conf that volcano-py ignores, and why: one of `SchedulerConf.key_warnings`, rendered once
    (`render`) into `SchedulerConf.skipped`, where every warning is printed and logged."""

    where: str  # the field path of the mapping holding the key, e.g. "tiers[1].plugins[4]"; "" for the top level
    key: str
    kind: KeyKind
    place: KeyPlace = KeyPlace.ARGUMENT
    plugin: str = ""  # the name of the plugin entry holding the key; "" outside a plugin entry
    suggestion: str = ""  # UNKNOWN: the closest known name, "" if none is close; UNLISTED: the listing key

    def render(self) -> str:
        if self.plugin:
            subject = f"plugin {self.plugin!r} ({self.where})" if self.where else f"plugin {self.plugin!r}"
        else:
            subject = self.where or "the conf's top level"
        return f"{subject} {self.place.value} {self.key!r}: {self._problem()}"

    def _problem(self) -> str:
        if self.kind is KeyKind.UNSUPPORTED:
            return f"not supported by volcano-py, ignored (Volcano's {self.plugin} reads it)"
        if self.kind is KeyKind.VOLCANO_IGNORES:
            return f"ignored; Volcano's {self.plugin} does not read it either"
        if self.kind is KeyKind.UNLISTED:
            return f"ignored, as Volcano ignores it: its resource is not listed in {self.suggestion!r}"
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        return f"unknown {self.place.value}, ignored (Volcano ignores it too){hint}"


@dataclass(frozen=True, slots=True)
class PluginOption:
    """One plugin entry of a tier: its raw `arguments` as written, its switches, and `args`, the plugin's typed
    arguments, parsed once when the conf is loaded (None only for an entry built by hand, not loaded)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    switches: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    where: str = field(default="", compare=False)  # e.g. "tiers[1].plugins[4]", for error messages
    source: str = field(default="", compare=False)
    args: object = field(default=None, compare=False)

    def enabled(self, switch: str) -> bool:
        """True unless the user set that switch to false; `enableX` and `enabledX` spellings are the same."""
        stem = _switch_stem(switch)
        if stem not in _KNOWN_STEMS:
            raise ValueError(f"{switch!r} is not a Volcano plugin switch")
        return all(value for key, value in self.switches.items() if _switch_stem(key) == stem)


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Mapping[str, Any]]
    skipped: tuple[str, ...]  # the warnings: what was skipped or fell back to a default, one fact each
    source: str
    notes: tuple[str, ...] = ()  # informational, e.g. that the conf was taken out of a ConfigMap manifest
    key_warnings: tuple[KeyWarning, ...] = ()  # the ignored keys among `skipped`, as values
