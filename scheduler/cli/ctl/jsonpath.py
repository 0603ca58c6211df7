"""Layer `ctl`: kubectl's `-o jsonpath=TEMPLATE`, the part of it people type.

A template is text with `{...}` actions (k8s.io/client-go/util/jsonpath): a path (`{.metadata.name}`,
`{.items[*].status.state.phase}`, `{.items[0].spec.tasks[-1].name}`, `{.metadata.labels['volcano.sh/job-name']}`,
`{.metadata.labels.app\\.kubernetes\\.io/name}`), a quoted string (`{"\\n"}`), and `{range PATH}...{end}` to
repeat the text between for each value. `$` is the object. Several values of one path print separated by a space;
a string prints as is, anything else as JSON. A key that is not there prints nothing, as kubectl's `get -o
jsonpath` (it allows missing keys). Filters (`[?(@.x)]`) and `..` are not supported: a template using them is
refused in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class JSONPathError(ValueError):
    """A template this module cannot read."""


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Path:
    steps: tuple[object, ...]  # a key (str), an index (int), a slice, or `*` (every item or value)


@dataclass(frozen=True, slots=True)
class Range:
    path: Path
    body: tuple[object, ...]


_STEP = re.compile(r"""\.((?:\\.|[^.\[\\])+)|\[\s*(\*|-?\d+|-?\d*:-?\d*|'[^']*'|"[^"]*")\s*\]|\.\*""")
_STRING = re.compile(r'"((?:\\.|[^"\\])*)"')


def _path(text: str, template: str) -> Path:
    body = text.strip()
    body = body[1:] if body.startswith("$") else body
    if body == "" or body == ".":
        return Path(())
    steps: list[object] = []
    position = 0
    while position < len(body):
        match = _STEP.match(body, position)
        if match is None:
            raise JSONPathError(f"jsonpath {template!r}: cannot read {body[position:]!r} (supported: .key, "
                                "[N], [*], [N:M], ['key'], range ... end)")
        if match.group(0) == ".*":
            steps.append("*")
        elif match.group(1) is not None:
            steps.append(match.group(1).replace("\\.", "."))
        else:
            inner = match.group(2)
            if inner == "*":
                steps.append("*")
            elif inner[0] in "'\"":
                steps.append(inner[1:-1])
            elif ":" in inner:
                low, high = inner.split(":")
                steps.append(slice(int(low) if low else None, int(high) if high else None))
            else:
                steps.append(int(inner))
        position = match.end()
    return Path(tuple(steps))


def _actions(template: str) -> Iterator[tuple[str, str]]:
    """("text", literal) and ("action", inside of braces) in order."""
    position = 0
    while position < len(template):
        start = template.find("{", position)
        if start < 0:
            yield "text", template[position:]
            return
        if start > position:
            yield "text", template[position:start]
        end, quoted = start + 1, False
        while end < len(template) and (quoted or template[end] != "}"):
            if template[end] == "\\":
                end += 1  # an escaped character, never the end
            elif template[end] == '"':
                quoted = not quoted
            end += 1
        if end >= len(template):
            raise JSONPathError(f"jsonpath {template!r}: unclosed {{")
        yield "action", template[start + 1:end]
        position = end + 1


def compile_template(template: str) -> tuple[object, ...]:
    stack: list[tuple[Path | None, list[object]]] = [(None, [])]
    for kind, text in _actions(template):
        nodes = stack[-1][1]
        if kind == "text":
            nodes.append(Text(text))
            continue
        inner = text.strip()
        if (string := _STRING.fullmatch(inner)) is not None:
            try:
                nodes.append(Text(json.loads(f'"{string.group(1)}"', strict=False)))
            except ValueError:
                raise JSONPathError(f"jsonpath {template!r}: bad string {inner}") from None
        elif inner.startswith("range "):
            stack.append((_path(inner[6:], template), []))
        elif inner == "end":
            if len(stack) == 1:
                raise JSONPathError(f"jsonpath {template!r}: {{end}} without {{range}}")
            path, body = stack.pop()
            assert path is not None
            stack[-1][1].append(Range(path, tuple(body)))
        elif inner.startswith("?") or ".." in inner or "?(" in inner:
            raise JSONPathError(f"jsonpath {template!r}: filters and recursive descent are not supported")
        else:
            nodes.append(_path(inner, template))
    if len(stack) != 1:
        raise JSONPathError(f"jsonpath {template!r}: {{range}} without {{end}}")
    return tuple(stack[0][1])


def _values(value: Any, steps: tuple[object, ...]) -> list[Any]:
    current = [value]
    for step in steps:
        following: list[Any] = []
        for item in current:
            if step == "*":
                following += list(item.values()) if isinstance(item, dict) else list(item) if isinstance(
                    item, list) else []
            elif isinstance(step, str):
                if isinstance(item, dict) and step in item:
                    following.append(item[step])
            elif isinstance(step, int):
                if isinstance(item, list) and -len(item) <= step < len(item):
                    following.append(item[step])
            elif isinstance(step, slice) and isinstance(item, list):
                following += item[step]
        current = following
    return current


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def _render(nodes: tuple[object, ...], value: Any) -> str:
    out = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Path):
            out.append(" ".join(_shown(v) for v in _values(value, node.steps)))
        elif isinstance(node, Range):
            out += [_render(node.body, item) for item in _values(value, node.path.steps)]
    return "".join(out)


def render(template: str, value: Any) -> str:
    """The template filled from `value` (an object, or a List of them)."""
    return _render(compile_template(template), value)
