"""Layer `framework`: read Volcano's `volcano-scheduler.conf` into values the session opens with.

The format is Volcano's own (`actions: "enqueue, allocate, backfill"`, `tiers:` of `plugins:` with `name`,
`arguments` and the `enableXxx` switches, `configurations:` of per-action arguments), so a Volcano ConfigMap
loads unchanged. A name Volcano has but volcano-py does not implement is skipped with a message; a name nobody
has, or a value of the wrong type, is a `ConfError` naming the file and the field path. A key Volcano does not
read is ignored with a warning (a `KeyWarning`, with the closest known name), never an error: Volcano reads the
file with yaml.v2, which ignores unknown keys, so a conf carrying one (`disableTaskOrder: true`) runs there.
Each plugin's arguments are parsed here, once, into the plugin's typed value (`conf_args.py`), so a bad argument
rejects the file when it is loaded, and an argument the plugin does not read is a warning too.

The values are in `conf_values.py`, the YAML and ConfigMap reading in `conf_yaml.py`; the names they export
are re-exported here, the module callers import.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from scheduler.framework.conf_args import ArgsParser, arg_bool, arg_float, arg_int, arg_str, with_args
from scheduler.framework.conf_values import (
    BUILTIN_SOURCE,
    PLUGIN_SWITCHES,
    VOLCANO_ACTIONS,
    VOLCANO_PLUGINS,
    ArgumentError,
    ConfError,
    KeyKind,
    KeyPlace,
    KeyWarning,
    PluginOption,
    SchedulerConf,
    Tier,
    closest,
)
from scheduler.framework.conf_yaml import CONFIGMAP_KEY, MAX_CONF_BYTES, freeze, load_yaml, unwrap_configmap

TOP_LEVEL_KEYS = ("actions", "tiers", "configurations", "metrics")
PLUGIN_KEYS = ("name", "arguments")
CONFIGURATION_KEYS = ("name", "arguments")

DEFAULT_ACTIONS = ("enqueue", "allocate", "backfill")
EXAMPLE_ACTIONS = '"enqueue, allocate, backfill"'
# Volcano's default tiers: `DefaultSchedulerConf` (pkg/scheduler/util.go) and the Helm chart's conf
# (installer/helm/chart/volcano/config/volcano-scheduler.conf, which adds binpack) both open tier 2 with overcommit,
# so its enqueue gate (`allocatable x 1.2`) holds a job before proportion's queue check does.
DEFAULT_TIERS = (
    ("priority", "gang", "conformance"),
    ("overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"),
)

# The plugins volcano-py implements: by name alone (arguments stay unparsed, for tests of the grammar), or
# each with the parser of its arguments (what the scheduler passes: scheduler.plugins.registry.PLUGIN_ARGS).
Implemented = Collection[str] | Mapping[str, ArgsParser]


def _suggest(name: str, known: Iterable[str]) -> str:
    close = closest(name, known)
    return f"; did you mean {close!r}?" if close else ""


# ---- parsing ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Reader:
    source: str
    implemented_actions: frozenset[str]
    implemented_plugins: frozenset[str]
    parsers: Mapping[str, ArgsParser] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    key_warnings: list[KeyWarning] = field(default_factory=list)

    def error(self, where: str, problem: str) -> ConfError:
        return ConfError(self.source, where, problem)

    def check_keys(self, entry: Mapping[Any, Any], where: str, allowed: Iterable[str], plugin: str = "") -> None:
        """A key not in `allowed` is ignored, as Volcano's yaml.v2 ignores it, with a warning and a suggestion."""
        allowed = tuple(allowed)
        for key in entry:
            if key not in allowed:
                self.warn_key(KeyWarning(where, str(key), KeyKind.UNKNOWN, KeyPlace.FIELD, plugin,
                                         closest(str(key), allowed)))

    def misspelling(self, where: str, wanted: str) -> str:
        """A hint for an error about a missing `wanted` key: the ignored key of `where` that was meant to be it."""
        for warning in self.key_warnings:
            if warning.where == where and warning.place is KeyPlace.FIELD and warning.suggestion == wanted:
                return f" (the key {warning.key!r} is ignored: did you mean {wanted!r}?)"
        return ""

    def warn_key(self, warning: KeyWarning) -> None:
        self.key_warnings.append(warning)
        self.skipped.append(warning.render())

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
        frozen: Mapping[str, Any] = freeze(arguments)
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
            raise self.error("tiers", "missing; expected a list of tiers, each with a list of plugins"
                             + self.misspelling("", "tiers"))
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
            raise self.error(f"{where}.plugins", f"expected a non-empty list of plugins, got {plugins!r}"
                             + self.misspelling(where, "plugins"))
        options = [self.plugin(entry, f"{where}.plugins[{j}]", positions) for j, entry in enumerate(plugins)]
        kept = tuple(option for option in options if option is not None)
        self.check_hierarchy_conflict(kept, where)
        return Tier(kept)

    def plugin(self, raw: Any, where: str, positions: dict[str, str]) -> PluginOption | None:
        if not isinstance(raw, Mapping):
            raise self.error(where, f"expected a mapping with a `name`, got {raw!r}")
        name = self.name_of(raw, where)
        self.check_keys(raw, where, PLUGIN_KEYS + tuple(sorted(PLUGIN_SWITCHES)), plugin=name)
        switches = self.switches_of(raw, where)
        arguments = self.arguments_of(raw, where)
        if name in positions:
            raise self.error(f"{where}.name",
                             f"plugin {name!r} is listed twice: at {positions[name]} and at {where}")
        positions[name] = where
        if name in self.implemented_plugins:
            return self.parsed(PluginOption(name, arguments, switches, where=where, source=self.source))
        if name in VOLCANO_PLUGINS:
            self.skipped.append(f"plugin {name!r} ({where}) is a Volcano plugin volcano-py does not "
                                f"implement; skipped")
            return None
        raise self.error(f"{where}.name", f"unknown plugin {name!r}"
                                          + _suggest(name, VOLCANO_PLUGINS | self.implemented_plugins))

    def parsed(self, option: PluginOption) -> PluginOption:
        """The entry with its typed arguments, if the plugin's parser is known (ArgumentError if bad)."""
        parse = self.parsers.get(option.name)
        return option if parse is None else with_args(option, parse, self.skipped, self.key_warnings)

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


def _parsers(implemented: Implemented) -> Mapping[str, ArgsParser]:
    return implemented if isinstance(implemented, Mapping) else {}


def parse_conf(
    text: str,
    *,
    source: str,
    implemented_actions: Collection[str],
    implemented_plugins: Implemented,
) -> SchedulerConf:
    """Parse the text of a `volcano-scheduler.conf` (or a whole ConfigMap manifest carrying one)."""
    if not text.strip():
        raise ConfError(source, "", "the file is empty; expected `actions:` and `tiers:`")
    doc = load_yaml(text, source, "the file")
    notes: tuple[str, ...] = ()
    unwrapped = unwrap_configmap(doc, source)
    if unwrapped is not None:
        inner, note = unwrapped
        notes = (note,)
        if not inner.strip():
            raise ConfError(source, f"data.{CONFIGMAP_KEY}", "the conf in the ConfigMap is empty")
        doc = load_yaml(inner, source, "the ConfigMap's conf")
    if not isinstance(doc, Mapping):
        raise ConfError(source, "", f"expected a mapping with `actions:` and `tiers:` at the top level, "
                                    f"got {type(doc).__name__}")
    reader = _Reader(source, _implemented(implemented_actions), _implemented(implemented_plugins),
                     _parsers(implemented_plugins))
    reader.check_keys(doc, "", TOP_LEVEL_KEYS)
    if "actions" not in doc:
        raise ConfError(source, "actions", 'missing; expected e.g. actions: "enqueue, allocate, backfill"'
                        + reader.misspelling("", "actions"))
    actions = reader.actions(doc["actions"])
    tiers = reader.tiers(doc.get("tiers"))
    configurations = reader.configurations(doc.get("configurations"))
    if doc.get("metrics") is not None:
        reader.skipped.append("section 'metrics' is Volcano's metrics-source setting, which volcano-py "
                              "does not read; skipped")
    return SchedulerConf(actions, tiers, configurations, tuple(reader.skipped), source, notes,
                         tuple(reader.key_warnings))


def load_conf_file(
    path: str | Path,
    *,
    implemented_actions: Collection[str],
    implemented_plugins: Implemented,
) -> SchedulerConf:
    source = str(path)
    try:
        size = Path(path).stat().st_size
        if size > MAX_CONF_BYTES:
            raise ConfError(source, "", f"the file is {size} bytes: more than a ConfigMap holds ({MAX_CONF_BYTES})")
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfError(source, "", f"cannot read the file: {err}") from None
    return parse_conf(text, source=source, implemented_actions=implemented_actions,
                      implemented_plugins=implemented_plugins)


def default_conf(
    *,
    implemented_actions: Collection[str],
    implemented_plugins: Implemented,
) -> SchedulerConf:
    """Volcano's documented default, less the plugins and actions volcano-py does not have yet."""
    reader = _Reader(BUILTIN_SOURCE, _implemented(implemented_actions), _implemented(implemented_plugins),
                     _parsers(implemented_plugins))
    tiers = tuple(
        Tier(tuple(reader.parsed(PluginOption(name, where=f"tiers[{i}].plugins[{j}]", source=BUILTIN_SOURCE))
                   for j, name in enumerate(tier) if name in reader.implemented_plugins))
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
    "CONFIGMAP_KEY",
    "PLUGIN_SWITCHES",
    "VOLCANO_ACTIONS",
    "VOLCANO_PLUGINS",
    "ArgumentError",
    "ConfError",
    "KeyKind",
    "KeyPlace",
    "KeyWarning",
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
