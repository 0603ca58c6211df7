"""Layer `framework`: read Volcano's `volcano-scheduler.conf` into values the session opens with.

The format is Volcano's own (`actions: "enqueue, allocate, backfill"`, `tiers:` of `plugins:` with `name`,
`arguments` and the `enableXxx` switches, `configurations:` of per-action arguments), so a Volcano ConfigMap
loads unchanged. A name Volcano has but volcano-py does not implement is skipped with a message; a name nobody
has, an unknown key, or a value of the wrong type is a `ConfError` naming the file and the field path.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

BUILTIN_SOURCE = "<built-in default>"
CONFIGMAP_KEY = "volcano-scheduler.conf"

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

TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")
PLUGIN_KEYS = ("name", "arguments")
CONFIGURATION_KEYS = ("name", "arguments")

DEFAULT_ACTIONS = ("enqueue", "allocate", "backfill")
EXAMPLE_ACTIONS = '"enqueue, allocate, backfill"'
DEFAULT_TIERS = (
    ("priority", "gang", "conformance"),
    ("drf", "predicates", "proportion", "nodeorder", "binpack"),
)

_SWITCH_PREFIX = re.compile(r"^[Ee]nabled?")


class ConfError(ValueError):
    """A scheduler configuration a person must fix; the message names the file and the field."""

    def __init__(self, source: str, where: str, problem: str) -> None:
        self.source = source
        self.where = where
        self.problem = problem
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")


def _switch_stem(key: str) -> str:
    """`enableJobOrder`, `enabledJobOrder` and `EnabledJobOrder` all name the `JobOrder` switch."""
    return _SWITCH_PREFIX.sub("", key, count=1)


_KNOWN_STEMS: frozenset[str] = frozenset(_switch_stem(key) for key in PLUGIN_SWITCHES)


# ---- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    switches: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    where: str = field(default="", compare=False)  # e.g. "tiers[1].plugins[4]", for error messages
    source: str = field(default="", compare=False)

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
    skipped: tuple[str, ...]
    source: str
    notes: tuple[str, ...] = ()  # informational, e.g. that the conf was taken out of a ConfigMap manifest


# ---- argument helpers ----------------------------------------------------------------------------------


def _arg_error(opt: PluginOption, key: str, expected: str, value: Any) -> ConfError:
    where = f"{opt.where}.arguments.{key}" if opt.where else f"arguments.{key}"
    return ConfError(opt.source or "<conf>", where,
                     f"plugin {opt.name!r} argument {key!r} must be {expected}, got {value!r}")


def arg_int(opt: PluginOption, key: str, default: int) -> int:
    value = opt.arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise _arg_error(opt, key, "an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _arg_error(opt, key, "an integer", value)


def arg_float(opt: PluginOption, key: str, default: float) -> float:
    value = opt.arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise _arg_error(opt, key, "a number", value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _arg_error(opt, key, "a number", value)


_TRUE_WORDS = frozenset({"1", "t", "true"})
_FALSE_WORDS = frozenset({"0", "f", "false"})


def arg_bool(opt: PluginOption, key: str, default: bool) -> bool:
    value = opt.arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise _arg_error(opt, key, "true or false", value)


def arg_str(opt: PluginOption, key: str, default: str) -> str:
    value = opt.arguments.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _arg_error(opt, key, "a string", value)


# ---- YAML ------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type information
    """SafeLoader that rejects a key given twice in one mapping, as Volcano's Go YAML decoder does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        try:
            hash(key)
        except TypeError:
            continue  # an unhashable key is reported by the base constructor
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})", key_node.start_mark)
        seen[key] = line
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, source: str, what: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}" if mark is not None else "unknown line"
        problem = err.problem or err.context or "invalid YAML"
        raise ConfError(source, "", f"invalid YAML in {what} at {line}: {problem}") from None
    except yaml.YAMLError as err:
        raise ConfError(source, "", f"YAML error in {what}: {err}") from None


def _freeze(value: Any) -> Any:
    """Read-only deep copy: mappings become MappingProxyType, lists become tuples, scalars stay as given."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


# ---- the ConfigMap wrapper ---------------------------------------------------------------------------


def _unwrap_configmap(doc: Any, source: str) -> tuple[str, str] | None:
    """If `doc` is a whole ConfigMap manifest, return (conf text, note); None if it is a plain conf."""
    if not isinstance(doc, Mapping) or doc.get("kind") != "ConfigMap":
        return None
    data = doc.get("data")
    if not isinstance(data, Mapping) or not data:
        raise ConfError(source, "data", f"a ConfigMap manifest must carry the conf under {CONFIGMAP_KEY!r}")
    key = CONFIGMAP_KEY if CONFIGMAP_KEY in data else _single_conf_key(data, source)
    text = data[key]
    if not isinstance(text, str):
        raise ConfError(source, f"data.{key}", "expected the conf as a string (use `|` for a block)")
    metadata = doc.get("metadata")
    meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    name = "/".join(str(part) for part in (meta.get("namespace"), meta.get("name")) if part)
    return text, f"read from key {key!r} of ConfigMap {name or '(unnamed)'} (a whole manifest was given)"


def _single_conf_key(data: Mapping[str, Any], source: str) -> str:
    keys = [str(k) for k in data if str(k).endswith(".conf")]
    if len(keys) != 1:
        found = sorted(str(k) for k in data)
        raise ConfError(source, "data", f"expected key {CONFIGMAP_KEY!r} in the ConfigMap, found {found}")
    return keys[0]


# ---- parsing ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Reader:
    source: str
    implemented_actions: frozenset[str]
    implemented_plugins: frozenset[str]
    skipped: list[str] = field(default_factory=list)

    def error(self, where: str, problem: str) -> ConfError:
        return ConfError(self.source, where, problem)

    def check_keys(self, entry: Mapping[Any, Any], where: str, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in entry:
            if key not in allowed:
                raise self.error(f"{where}.{key}" if where else str(key),
                                 f"unknown key {key!r}; expected one of {', '.join(sorted(allowed))}"
                                 + _suggest(str(key), allowed))

    def name_of(self, entry: Mapping[Any, Any], where: str) -> str:
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.error(f"{where}.name", f"expected a non-empty name, got {name!r}")
        return name.strip()

    def arguments_of(self, entry: Mapping[Any, Any], where: str) -> Mapping[str, Any]:
        arguments = entry.get("arguments")
        if arguments is None:
            return MappingProxyType({})
        if not isinstance(arguments, Mapping):
            raise self.error(f"{where}.arguments",
                             f"expected a mapping of argument names to values, got {arguments!r}")
        for key in arguments:
            if not isinstance(key, str):
                raise self.error(f"{where}.arguments", f"argument names must be strings, got {key!r}")
        frozen: Mapping[str, Any] = _freeze(arguments)
        return frozen

    # actions

    def actions(self, raw: Any) -> tuple[str, ...]:
        if not isinstance(raw, str):
            raise self.error("actions", f"expected a comma-separated string such as {EXAMPLE_ACTIONS}, "
                                        f"got {raw!r}")
        names = [part.strip() for part in raw.split(",")]
        if not any(names):
            raise self.error("actions", f"the action list is empty; expected e.g. {EXAMPLE_ACTIONS}")
        kept: list[str] = []
        first_seen: dict[str, int] = {}
        for position, name in enumerate(names, start=1):
            if not name:
                raise self.error("actions", f"action {position} is empty (a stray comma in {raw!r}?)")
            if name in first_seen:
                raise self.error("actions", f"action {name!r} is listed twice (positions {first_seen[name]} "
                                            f"and {position})")
            first_seen[name] = position
            if self.known_action(name, f"actions, position {position}", "actions"):
                kept.append(name)
        if not kept:
            raise self.error("actions", f"none of the actions {raw!r} is implemented by volcano-py; "
                                        f"implemented: {', '.join(sorted(self.implemented_actions))}")
        return tuple(kept)

    def known_action(self, name: str, position: str, field_path: str) -> bool:
        """True if volcano-py runs it; False (and a skip message) if only Volcano has it; else ConfError."""
        if name in self.implemented_actions:
            return True
        if name in VOLCANO_ACTIONS:
            self.skipped.append(f"action {name!r} ({position}) is a Volcano action volcano-py does not "
                                f"implement; skipped")
            return False
        raise self.error(field_path, f"unknown action {name!r} ({position})"
                                     + _suggest(name, VOLCANO_ACTIONS | self.implemented_actions))

    # tiers

    def tiers(self, raw: Any) -> tuple[Tier, ...]:
        if raw is None:
            raise self.error("tiers", "missing; expected a list of tiers, each with a list of plugins")
        if not isinstance(raw, list) or not raw:
            raise self.error("tiers", f"expected a non-empty list of tiers, got {raw!r}")
        positions: dict[str, str] = {}
        tiers = tuple(self.tier(entry, f"tiers[{i}]", positions) for i, entry in enumerate(raw))
        if "capacity" in positions and "proportion" in positions:
            raise self.error(positions["capacity"], "capacity and proportion both decide each queue's share "
                                                    f"(proportion at {positions['proportion']}); keep one of them")
        return tiers

    def tier(self, raw: Any, where: str, positions: dict[str, str]) -> Tier:
        if not isinstance(raw, Mapping):
            raise self.error(where, f"expected a mapping with a `plugins` list, got {raw!r}")
        self.check_keys(raw, where, ("plugins",))
        plugins = raw.get("plugins")
        if not isinstance(plugins, list) or not plugins:
            raise self.error(f"{where}.plugins", f"expected a non-empty list of plugins, got {plugins!r}")
        options = [self.plugin(entry, f"{where}.plugins[{j}]", positions) for j, entry in enumerate(plugins)]
        kept = tuple(option for option in options if option is not None)
        self.check_hierarchy_conflict(kept, where)
        return Tier(kept)

    def plugin(self, raw: Any, where: str, positions: dict[str, str]) -> PluginOption | None:
        if not isinstance(raw, Mapping):
            raise self.error(where, f"expected a mapping with a `name`, got {raw!r}")
        name = self.name_of(raw, where)
        self.check_plugin_keys(raw, where)
        switches = self.switches_of(raw, where)
        arguments = self.arguments_of(raw, where)
        if name in positions:
            raise self.error(f"{where}.name",
                             f"plugin {name!r} is listed twice: at {positions[name]} and at {where}")
        positions[name] = where
        if name in self.implemented_plugins:
            return PluginOption(name, arguments, switches, where=where, source=self.source)
        if name in VOLCANO_PLUGINS:
            self.skipped.append(f"plugin {name!r} ({where}) is a Volcano plugin volcano-py does not "
                                f"implement; skipped")
            return None
        raise self.error(f"{where}.name", f"unknown plugin {name!r}"
                                          + _suggest(name, VOLCANO_PLUGINS | self.implemented_plugins))

    def check_plugin_keys(self, raw: Mapping[Any, Any], where: str) -> None:
        allowed = PLUGIN_KEYS + tuple(sorted(PLUGIN_SWITCHES))
        for key in raw:
            if key in allowed:
                continue
            hint = _suggest(str(key), allowed)
            raise self.error(f"{where}.{key}", f"unknown key {key!r} in a plugin entry; expected name, "
                                               f"arguments or a Volcano switch such as enableJobOrder{hint}")

    def switches_of(self, raw: Mapping[Any, Any], where: str) -> Mapping[str, bool]:
        switches: dict[str, bool] = {}
        for key, value in raw.items():
            if key not in PLUGIN_SWITCHES:
                continue
            if not isinstance(value, bool):
                raise self.error(f"{where}.{key}", f"expected true or false, got {value!r}")
            switches[key] = value
        return MappingProxyType(switches)

    def check_hierarchy_conflict(self, plugins: tuple[PluginOption, ...], where: str) -> None:
        """Volcano refuses hierarchical drf beside proportion in one tier; so do we."""
        names = {p.name for p in plugins}
        hierarchical_drf = any(p.name == "drf" and p.switches.get("enableHierarchy") for p in plugins)
        if "proportion" in names and hierarchical_drf:
            raise self.error(where, "drf with enableHierarchy: true and proportion conflict in one tier; "
                                    "remove one of them")

    # configurations

    def configurations(self, raw: Any) -> Mapping[str, Mapping[str, Any]]:
        if raw is None:
            return MappingProxyType({})
        if not isinstance(raw, list):
            raise self.error("configurations", f"expected a list of {{name, arguments}} entries, got {raw!r}")
        result: dict[str, Mapping[str, Any]] = {}
        positions: dict[str, str] = {}
        for i, entry in enumerate(raw):
            where = f"configurations[{i}]"
            if not isinstance(entry, Mapping):
                raise self.error(where, f"expected a mapping with `name` and `arguments`, got {entry!r}")
            name = self.name_of(entry, where)
            self.check_keys(entry, where, CONFIGURATION_KEYS)
            arguments = self.arguments_of(entry, where)
            if name in positions:
                raise self.error(f"{where}.name",
                                 f"action {name!r} is configured twice: at {positions[name]} and at {where}")
            positions[name] = where
            if self.known_action(name, where, f"{where}.name"):
                result[name] = arguments
        return MappingProxyType(result)


def _implemented(names: Collection[str]) -> frozenset[str]:
    return frozenset(names)


def parse_conf(
    text: str,
    *,
    source: str,
    implemented_actions: Collection[str],
    implemented_plugins: Collection[str],
) -> SchedulerConf:
    """Parse the text of a `volcano-scheduler.conf` (or a whole ConfigMap manifest carrying one)."""
    if not text.strip():
        raise ConfError(source, "", "the file is empty; expected `actions:` and `tiers:`")
    doc = _load_yaml(text, source, "the file")
    notes: tuple[str, ...] = ()
    unwrapped = _unwrap_configmap(doc, source)
    if unwrapped is not None:
        inner, note = unwrapped
        notes = (note,)
        if not inner.strip():
            raise ConfError(source, f"data.{CONFIGMAP_KEY}", "the conf in the ConfigMap is empty")
        doc = _load_yaml(inner, source, "the ConfigMap's conf")
    if not isinstance(doc, Mapping):
        raise ConfError(source, "", f"expected a mapping with `actions:` and `tiers:` at the top level, "
                                    f"got {type(doc).__name__}")
    reader = _Reader(source, _implemented(implemented_actions), _implemented(implemented_plugins))
    reader.check_keys(doc, "", TOP_LEVEL_KEYS)
    if "actions" not in doc:
        raise ConfError(source, "actions", 'missing; expected e.g. actions: "enqueue, allocate, backfill"')
    actions = reader.actions(doc["actions"])
    tiers = reader.tiers(doc.get("tiers"))
    configurations = reader.configurations(doc.get("configurations"))
    if doc.get("metrics") is not None:
        reader.skipped.append("section 'metrics' is Volcano's metrics-source setting, which volcano-py "
                              "does not read; skipped")
    return SchedulerConf(actions, tiers, configurations, tuple(reader.skipped), source, notes)


def load_conf_file(
    path: str | Path,
    *,
    implemented_actions: Collection[str],
    implemented_plugins: Collection[str],
) -> SchedulerConf:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfError(source, "", f"cannot read the file: {err}") from None
    return parse_conf(text, source=source, implemented_actions=implemented_actions,
                      implemented_plugins=implemented_plugins)


def default_conf(
    *,
    implemented_actions: Collection[str],
    implemented_plugins: Collection[str],
) -> SchedulerConf:
    """Volcano's documented default, less the plugins and actions volcano-py does not have yet."""
    plugins = _implemented(implemented_plugins)
    tiers = tuple(
        Tier(tuple(PluginOption(name, where=f"tiers[{i}].plugins[{j}]", source=BUILTIN_SOURCE)
                   for j, name in enumerate(tier) if name in plugins))
        for i, tier in enumerate(DEFAULT_TIERS)
    )
    actions = tuple(name for name in DEFAULT_ACTIONS if name in implemented_actions)
    return SchedulerConf(actions, tiers, MappingProxyType({}), (), BUILTIN_SOURCE)


# ---- describing ------------------------------------------------------------------------------------


def _render(value: Any) -> str:
    if isinstance(value, Mapping | tuple | list):
        return json.dumps(_thaw(value), separators=(", ", ": "), default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


def _render_arguments(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={_render(value)}" for key, value in arguments.items())


def _describe_plugin(option: PluginOption) -> str:
    parts = [option.name]
    if option.arguments:
        parts.append(f"arguments: {_render_arguments(option.arguments)}")
    off = sorted(key for key, value in option.switches.items() if not value)
    if off:
        parts.append(f"turned off: {', '.join(off)}")
    return parts[0] if len(parts) == 1 else f"{parts[0]} ({'; '.join(parts[1:])})"


def describe_conf(conf: SchedulerConf) -> str:
    """What `volcano-py conf check FILE` prints: stable, one fact a line."""
    lines = [f"scheduler conf: {conf.source}"]
    lines += [f"note: {note}" for note in conf.notes]
    lines.append(f"actions, in order: {', '.join(conf.actions) if conf.actions else '(none)'}")
    for i, tier in enumerate(conf.tiers):
        lines.append(f"tier {i + 1} (tiers[{i}]):")
        described = [f"  - {_describe_plugin(option)}" for option in tier.plugins]
        lines += described or ["  (no plugin here that volcano-py runs)"]
    if conf.configurations:
        lines.append("action configurations:")
        lines += [f"  - {name}: {_render_arguments(args) or '(no arguments)'}"
                  for name, args in conf.configurations.items()]
    if conf.skipped:
        lines.append(f"warnings ({len(conf.skipped)}):")
        lines += [f"  - {message}" for message in conf.skipped]
    else:
        lines.append("warnings: none")
    return "\n".join(lines) + "\n"


__all__ = [
    "BUILTIN_SOURCE",
    "PLUGIN_SWITCHES",
    "VOLCANO_ACTIONS",
    "VOLCANO_PLUGINS",
    "ConfError",
    "PluginOption",
    "SchedulerConf",
    "Tier",
    "arg_bool",
    "arg_float",
    "arg_int",
    "arg_str",
    "default_conf",
    "describe_conf",
    "load_conf_file",
    "parse_conf",
]
