"""Layer `framework`: a plugin entry's raw `arguments` to the plugin's own frozen, typed value.

Each plugin declares a frozen dataclass of its arguments and a `parse_args(reader)` classmethod; the conf
loader calls it once per entry, when the file is loaded, and keeps the value on the `PluginOption`. A value the
plugin cannot use is an `ArgumentError` then, naming the plugin, the key and the value, so the file is rejected
before any cycle runs. A value Volcano replaces with its default (a negative binpack resource weight, an
overcommit factor below 1) is replaced here too and noted among the conf's warnings.

Spellings are Volcano's: a number may be given as a string (`binpack.weight: "10"`), a whole float as an
integer, a boolean as `true`, `"True"`, `"1"` or `"0"`; a missing argument or `null` takes the default.

The reader records every key `parse_args` asks for. An argument of the entry that was not asked for is ignored,
as Volcano ignores an argument its plugin does not read, and gets one `KeyWarning`: not supported by volcano-py
if Volcano's plugin of that name reads it (`volcano_args.py`), else unknown, with the closest known name. So is
a switch a plugin reads itself (`enableHierarchy`) when volcano-py's plugin does not.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.durations import SECOND, DurationError, parse_go_duration
from scheduler.framework.conf_values import ArgumentError, KeyKind, KeyPlace, KeyWarning, PluginOption, closest
from scheduler.framework.volcano_args import (
    VOLCANO_PLUGIN_SWITCHES,
    VolcanoReads,
    listing_of,
    volcano_keys,
    volcano_reads,
    volcano_reads_switch,
)

log = logging.getLogger("volcano_py.conf")


@dataclass(frozen=True, slots=True)
class NoArgs:
    """The arguments of a plugin that reads none."""


NO_ARGS = NoArgs()


def _arg_error(opt: PluginOption, key: str, expected: str, value: Any) -> ArgumentError:
    where = f"{opt.where}.arguments.{key}" if opt.where else f"arguments.{key}"
    return ArgumentError(opt.source or "<conf>", where, opt.name, key, value, expected)


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


_WHOLE = re.compile(r"[+-]?[0-9]{1,18}")
_TRUE_WORDS = frozenset({"1", "t", "true"})
_FALSE_WORDS = frozenset({"0", "f", "false"})


def as_bool(value: Any) -> bool | None:
    """A boolean as Volcano's confs spell it (`true`, `"True"`, `"1"`, `"0"`, ...); None if it is not one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    return None


def whole_number(raw: object, low: int, high: int) -> int:
    """An action's whole-number argument (`maxDomains`, `maxEvictionsPerCycle`, ...) from `low` to `high`, as the
    conf spells it (10 or "10"); ValueError for anything else: a bool, a fraction, a word, out of range."""
    text = str(raw).strip() if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
    if not _WHOLE.fullmatch(text):  # ASCII digits only: int() would also take "1_000" and other scripts' digits
        raise ValueError(f"not a whole number: {str(raw)[:40]!r}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{value} is not from {low} to {high}")
    return value


def whole_number_or(raw: object, default: int, low: int, high: int) -> int:
    """`whole_number`, or `default` where it would refuse (`conf check` names the refused value)."""
    try:
        return whole_number(raw, low, high)
    except ValueError:
        return default


def arg_bool(opt: PluginOption, key: str, default: bool) -> bool:
    value = opt.arguments.get(key)
    if value is None:
        return default
    parsed = as_bool(value)
    if parsed is None:
        raise _arg_error(opt, key, "true or false", value)
    return parsed


def arg_str(opt: PluginOption, key: str, default: str) -> str:
    value = opt.arguments.get(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _arg_error(opt, key, "a string", value)


@dataclass(slots=True)
class ArgReader:
    """One plugin entry's arguments, as a plugin's `parse_args` reads them: typed getters with defaults, an
    `ArgumentError` for a value the plugin cannot use, and warnings for values replaced by a default. Every key
    asked for, present or not, is recorded in `asked` (switches in `asked_switches`)."""

    option: PluginOption
    warnings: list[str] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)
    asked_switches: set[str] = field(default_factory=set)

    def names(self) -> Iterator[str]:
        """The argument keys as written; a key is asked for when it is read, not when it is listed."""
        return iter(self.option.arguments)

    def raw(self, key: str) -> Any:
        """The value as written (read-only mappings and tuples), None if absent."""
        self.asked.add(key)
        return self.option.arguments.get(key)

    def switch(self, key: str) -> bool | None:
        """A switch (`enableHierarchy`) as written on the entry, None if not given."""
        self.asked_switches.add(key)
        return self.option.switches.get(key)

    def fail(self, key: str, expected: str) -> ArgumentError:
        return _arg_error(self.option, key, expected, self.raw(key))

    def warn(self, key: str, message: str) -> None:
        where = f" ({self.option.where})" if self.option.where else ""
        self.warnings.append(f"plugin {self.option.name!r}{where} argument {key!r}: {message}")

    def duration(self, key: str, value: object, high: float) -> float:
        """`value` (the argument `key`, or an entry of it) as a Go duration in seconds, from 0 to `high`."""
        try:
            seconds = parse_go_duration(str(value).strip()) / SECOND
        except DurationError:
            raise self.fail(key, "a Go duration such as 30m or 1h30m") from None
        if not 0 <= seconds <= high:
            raise self.fail(key, f"a duration from 0s to {high / 3600:g}h")
        return seconds

    def integer(self, key: str, default: int) -> int:
        self.asked.add(key)
        return arg_int(self.option, key, default)

    def number(self, key: str, default: float) -> float:
        self.asked.add(key)
        return arg_float(self.option, key, default)

    def boolean(self, key: str, default: bool) -> bool:
        self.asked.add(key)
        return arg_bool(self.option, key, default)

    def string(self, key: str, default: str) -> str:
        self.asked.add(key)
        return arg_str(self.option, key, default)

    def weight(self, key: str, default: int) -> int:
        """An integer weight (0 turns the term off). Volcano takes a negative one as it is, so a conf written for
        it loads here too; it gets a warning, since it makes the term count against a node."""
        value = self.integer(key, default)
        if value < 0:
            self.warn(key, f"weight {value} is negative: this term's scores count against a node, as in Volcano")
        return value

    def finite(self, key: str, default: float) -> float:
        """A finite number; a negative one is taken as it is, with a warning (see `weight`)."""
        value = self.number(key, default)
        if not math.isfinite(value):
            raise self.fail(key, "a finite number")
        if value < 0:
            self.warn(key, f"weight {value:g} is negative: this term's scores count against a node")
        return value

    def choice(self, key: str, default: str, choices: Collection[str]) -> str:
        value = self.string(key, default)
        if value not in choices:
            raise self.fail(key, f"one of {', '.join(choices)}")
        return value


ArgsParser = Callable[[ArgReader], object]


# Argument keys share a plugin's namespace (`predicate.`), which alone makes two of them 70% alike to difflib:
# `predicates.GPUSharingEnable` is no typo of `predicate.CacheEnable`. A misspelling scores above 0.9.
ARGUMENT_CUTOFF = 0.8


def ignored_keys(reader: ArgReader) -> list[KeyWarning]:
    """One warning for each argument of the entry, and each plugin-read switch, that `parse_args` never asked for."""
    option = reader.option
    warnings = [_ignored_argument(option, key, reader.asked) for key in option.arguments if key not in reader.asked]
    for switch in option.switches:
        if switch in VOLCANO_PLUGIN_SWITCHES and switch not in reader.asked_switches:
            kind = KeyKind.UNSUPPORTED if volcano_reads_switch(option.name, switch) else KeyKind.VOLCANO_IGNORES
            warnings.append(KeyWarning(option.where, switch, kind, KeyPlace.SWITCH, option.name))
    return warnings


def _ignored_argument(option: PluginOption, key: str, asked: Collection[str]) -> KeyWarning:
    reads = volcano_reads(option.name, key, option.arguments)
    if reads is VolcanoReads.READS:
        return KeyWarning(option.where, key, KeyKind.UNSUPPORTED, KeyPlace.ARGUMENT, option.name)
    if reads is VolcanoReads.DECLARES_ONLY:
        return KeyWarning(option.where, key, KeyKind.VOLCANO_IGNORES, KeyPlace.ARGUMENT, option.name)
    listing = listing_of(option.name, key)
    if listing:
        return KeyWarning(option.where, key, KeyKind.UNLISTED, KeyPlace.ARGUMENT, option.name, listing)
    suggestion = closest(key, {*asked, *volcano_keys(option.name)}, ARGUMENT_CUTOFF)
    return KeyWarning(option.where, key, KeyKind.UNKNOWN, KeyPlace.ARGUMENT, option.name, suggestion)


def with_args(option: PluginOption, parse: ArgsParser, warnings: list[str],
              key_warnings: list[KeyWarning] | None = None) -> PluginOption:
    """`option` carrying its typed arguments; the parser's warnings and one for each key it ignored are added
    to `warnings` (rendered) and the latter to `key_warnings` (as values)."""
    reader = ArgReader(option, warnings)
    parsed = replace(option, args=parse(reader))
    for ignored in ignored_keys(reader):
        warnings.append(ignored.render())
        if key_warnings is not None:
            key_warnings.append(ignored)
    return parsed


def parse_unloaded(option: PluginOption, parse: ArgsParser) -> object:
    """The typed arguments of an entry built by hand rather than loaded (a test, a benchmark); warnings are
    logged, since there is no conf to carry them."""
    reader = ArgReader(option)
    args = parse(reader)
    for warning in [*reader.warnings, *(ignored.render() for ignored in ignored_keys(reader))]:
        log.warning("scheduler conf: %s", warning)
    return args
