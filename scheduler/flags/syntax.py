"""Go's flag syntax: a `FlagSet` of declared `Flag`s turns a command line into option values. Layer: flags.

The syntax is pflag's, which Volcano's binaries parse with (and Go's `flag`, which klog's flags come from):
`--name=value`, `--name value`, `-name=value`, `-v=3`, `-v3`; a boolean is `--name` or `--name=true|false`
(never `--name false`); `_` and `-` are the same in names (component-base's WordSepNormalizeFunc); `--` ends
the flags. Arguments that are not flags are ignored with a warning, as Volcano ignores them: Volcano's own
chart passes a literal `2>&1`. A flag without `dest` is accepted with one warning that says why it has no effect;
a flag nobody has is an error naming it and the closest known one.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from scheduler.durations import DurationError, format_duration, parse_seconds


class FlagError(Exception):
    """A command line that cannot be parsed; the message names the flag (and the closest known one)."""

    def __init__(self, message: str, *, flag: str | None = None, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.flag = flag
        self.suggestion = suggestion


class HelpRequested(Exception):  # noqa: N818 - not an error: `-h` / `--help`
    """`-h` or `--help`: print `usage()` and exit 0, as Go's flag package does."""


class Kind(Enum):
    BOOL = "bool"
    STRING = "string"
    INT = "int"
    FLOAT = "float"
    DURATION = "duration"
    STRINGS = "stringArray"  # repeatable, one item per occurrence (pflag's StringArray: --scheduler-name)
    LIST = "strings"  # repeatable and comma separated (pflag's StringSlice: --node-selector)


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    kind: Kind
    help: str = ""
    dest: str | None = None  # the option it sets; None: accepted with a warning
    default: object = None
    aliases: tuple[str, ...] = ()
    no_effect: str = ""  # why it has no effect in volcano-py (the warning's reason)
    harmless: tuple[object, ...] = ()  # values that ask for what volcano-py does anyway: no warning
    negatable: bool = False  # also `--no-NAME`, volcano-py's own spelling of `--NAME=false`
    choices: tuple[str, ...] = ()

    @property
    def honoured(self) -> bool:
        return self.dest is not None


@dataclass(frozen=True, slots=True)
class Ignored:
    """An argument accepted without effect: a flag volcano-py has no use for, or a stray positional argument."""

    arg: str  # the flag's name (`node-worker-threads`) or the argument as given (`2>&1`)
    reason: str
    positional: bool = False

    def message(self) -> str:
        if self.positional:
            return f"argument {self.arg!r} is not a flag and has no effect ({self.reason})"
        return f"--{self.arg} has no effect in volcano-py: {self.reason}"


@dataclass(frozen=True, slots=True)
class Parsed:
    values: Mapping[str, object]  # every option, given or default
    given: frozenset[str]  # the options set on the command line
    ignored: tuple[Ignored, ...]


@dataclass(frozen=True, slots=True)
class FlagSet:
    command: str
    flags: tuple[Flag, ...]
    description: str = ""  # what the command is for: the head of its --help
    _index: dict[str, Flag] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Flag] = {}
        for flag in self.flags:
            for name in (flag.name, *flag.aliases):
                if name in index:
                    raise ValueError(f"flag --{name} is declared twice")
                index[name] = flag
        object.__setattr__(self, "_index", index)

    def lookup(self, name: str) -> Flag | None:
        return self._index.get(normalize(name))

    def parse(self, argv: Sequence[str]) -> Parsed:
        values: dict[str, object] = {f.dest: _copy(f.default) for f in self.flags if f.dest is not None}
        given: set[str] = set()
        ignored: list[Ignored] = []
        args = list(argv)
        i = 0
        while i < len(args):
            arg, i = args[i], i + 1
            if arg == "--":
                ignored += [_positional(a) for a in args[i:]]
                break
            if not arg.startswith("-") or arg == "-":
                ignored.append(_positional(arg))
                continue
            body = arg[2:] if arg.startswith("--") else arg[1:]
            if not body or body[0] in "-=":
                raise FlagError(f"bad flag syntax: {arg}")
            name, has_value, text = body.partition("=")
            flag, value = self._resolve(arg, normalize(name), bool(has_value), text)
            if flag.kind is not Kind.BOOL and value is None:
                if i >= len(args):
                    raise FlagError(f"flag needs an argument: --{flag.name}", flag=flag.name)
                value, i = args[i], i + 1
            converted = _convert(flag, value)
            if flag.dest is not None:
                _store(values, given, flag, converted)
            elif converted not in flag.harmless and all(w.arg != flag.name for w in ignored):
                ignored.append(Ignored(flag.name, flag.no_effect))  # once, however often it is given
        return Parsed(values, frozenset(given), tuple(ignored))

    def _resolve(self, arg: str, name: str, has_value: bool, text: str) -> tuple[Flag, str | None]:
        """The flag `arg` names, and its inline value (None: none given; booleans then mean true)."""
        if name in ("h", "help"):
            raise HelpRequested
        flag = self._index.get(name)
        if flag is not None:
            return flag, text if has_value else None
        if name.startswith("no-"):
            negated = self._index.get(name[3:])
            if negated is not None and negated.negatable:
                if has_value:
                    raise FlagError(f"flag --{name} takes no value: {arg}", flag=name)
                return negated, "false"
        short = self._index.get(name[:1])
        if short is not None and len(name[:1]) == 1 and name[1:].isdigit() and not has_value:
            return short, name[1:]  # pflag's shorthand with the value attached: -v3
        raise self._unknown(arg, name)

    def _unknown(self, arg: str, name: str) -> FlagError:
        close = difflib.get_close_matches(name, list(self._index), n=1, cutoff=0.6)
        hint = f" (did you mean --{close[0]}?)" if close else ""
        return FlagError(f"unknown flag: {arg.partition('=')[0]}{hint}", flag=name,
                         suggestion=close[0] if close else None)

    def usage(self) -> str:
        """--help: what the command is for, the flags that work, then Volcano's flags that have no effect in
        volcano-py under one heading."""
        lines = [f"Usage: volcano-py {self.command} [flags]", ""]
        if self.description:
            lines += [*textwrap.wrap(self.description, 100), ""]
        honoured = sorted((f for f in self.flags if f.honoured), key=lambda f: f.name)
        ignored = sorted((f for f in self.flags if not f.honoured), key=lambda f: f.name)
        lines.append("Flags:")
        lines += [self._entry(flag, flag.help) for flag in honoured]
        if ignored:
            lines += ["", f"{COMPATIBILITY_HEADING}:"]
            lines += [self._entry(flag, flag.no_effect) for flag in ignored]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _entry(flag: Flag, text: str) -> str:
        spellings = (flag.name, *flag.aliases, *((f"no-{flag.name}",) if flag.negatable else ()))
        names = ", ".join(f"--{n}" for n in spellings)
        kind = "" if flag.kind is Kind.BOOL else f" {flag.kind.value}"
        return f"  {names}{kind}\n        {text}{_show_default(flag) if flag.honoured else ''}"


COMPATIBILITY_HEADING = ("Volcano compatibility flags (accepted so that Volcano's Deployment args run unchanged; "
                         "no effect in volcano-py, one warning each when given)")


def normalize(name: str) -> str:
    return name.replace("_", "-")


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"invalid boolean {text!r}")


def _convert(flag: Flag, value: str | None) -> object:
    try:
        match flag.kind:
            case Kind.BOOL:
                return True if value is None else parse_bool(value)
            case Kind.INT:
                return int(str(value), 0) if str(value).lower().startswith(("0x", "0o", "0b")) else int(str(value))
            case Kind.FLOAT:
                return float(str(value))
            case Kind.DURATION:
                return parse_seconds(str(value))
            case Kind.LIST:
                return tuple(v.strip() for v in str(value).split(",") if v.strip())
            case _:
                text = str(value)
                if flag.choices and text not in flag.choices:
                    raise ValueError(f"must be one of {', '.join(flag.choices)}")
                return text
    except (ValueError, DurationError) as exc:
        raise FlagError(f"invalid argument {value!r} for --{flag.name}: {exc}", flag=flag.name) from None


def _store(values: dict[str, object], given: set[str], flag: Flag, value: object) -> None:
    assert flag.dest is not None
    first = flag.dest not in given  # pflag: the first occurrence replaces the default, later ones append
    given.add(flag.dest)
    if flag.kind in (Kind.STRINGS, Kind.LIST):
        items = value if isinstance(value, tuple) else (value,)
        before = () if first else values[flag.dest]
        assert isinstance(before, tuple)
        values[flag.dest] = (*before, *items)
    else:
        values[flag.dest] = value


def _copy(default: object) -> object:
    return tuple(default) if isinstance(default, list) else default


def _positional(arg: str) -> Ignored:
    return Ignored(arg, "Volcano's components ignore it too", positional=True)


def _show_default(flag: Flag) -> str:
    if flag.default in (None, False, "", ()):
        return ""
    if flag.kind is Kind.DURATION and isinstance(flag.default, int | float):
        return f" (default {format_duration(float(flag.default))})"
    if isinstance(flag.default, tuple):
        return f" (default [{','.join(map(str, flag.default))}])"
    return f" (default {flag.default})"

