"""Layer `framework`: a plugin entry's raw `arguments` to the plugin's own frozen, typed value.

Each plugin declares a frozen dataclass of its arguments and a `parse_args(reader)` classmethod; the conf
loader calls it once per entry, when the file is loaded, and keeps the value on the `PluginOption`. A value the
plugin cannot use is an `ArgumentError` then, naming the plugin, the key and the value, so the file is rejected
before any cycle runs. A value Volcano replaces with its default (a negative binpack resource weight, an
overcommit factor below 1) is replaced here too and noted among the conf's warnings.

Spellings are Volcano's: a number may be given as a string (`binpack.weight: "10"`), a whole float as an
integer, a boolean as `true`, `"True"`, `"1"` or `"0"`; a missing argument or `null` takes the default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.framework.conf_values import ArgumentError, PluginOption

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


@dataclass(slots=True)
class ArgReader:
    """One plugin entry's arguments, as a plugin's `parse_args` reads them: typed getters with defaults, an
    `ArgumentError` for a value the plugin cannot use, and warnings for values replaced by a default."""

    option: PluginOption
    warnings: list[str] = field(default_factory=list)

    def keys(self) -> Iterator[str]:
        return iter(self.option.arguments)

    def raw(self, key: str) -> Any:
        """The value as written (read-only mappings and tuples), None if absent."""
        return self.option.arguments.get(key)

    def switch(self, key: str) -> bool | None:
        """A switch (`enableHierarchy`) as written on the entry, None if not given."""
        return self.option.switches.get(key)

    def fail(self, key: str, expected: str) -> ArgumentError:
        return _arg_error(self.option, key, expected, self.raw(key))

    def warn(self, key: str, message: str) -> None:
        where = f" ({self.option.where})" if self.option.where else ""
        self.warnings.append(f"plugin {self.option.name!r}{where} argument {key!r}: {message}")

    def integer(self, key: str, default: int) -> int:
        return arg_int(self.option, key, default)

    def number(self, key: str, default: float) -> float:
        return arg_float(self.option, key, default)

    def boolean(self, key: str, default: bool) -> bool:
        return arg_bool(self.option, key, default)

    def string(self, key: str, default: str) -> str:
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


def with_args(option: PluginOption, parse: ArgsParser, warnings: list[str]) -> PluginOption:
    """`option` carrying its typed arguments; the parser's warnings are added to `warnings`."""
    reader = ArgReader(option, warnings)
    return replace(option, args=parse(reader))


def parse_unloaded(option: PluginOption, parse: ArgsParser) -> object:
    """The typed arguments of an entry built by hand rather than loaded (a test, a benchmark); warnings are
    logged, since there is no conf to carry them."""
    reader = ArgReader(option)
    args = parse(reader)
    for warning in reader.warnings:
        log.warning("scheduler conf: %s", warning)
    return args
