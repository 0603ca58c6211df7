"""Layer `framework`: the text of a scheduler conf to plain data, as Volcano's Go YAML decoder reads it.

A key given twice in one mapping is an error (PyYAML would keep the last silently), and a whole ConfigMap
manifest is unwrapped to the conf it carries. What the data means is `conf.py`'s business.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import yaml

from scheduler.framework.conf_values import ConfError

CONFIGMAP_KEY = "volcano-scheduler.conf"
# A conf is a ConfigMap's value, which Kubernetes caps at 1 MiB; anything larger is not one. Aliases are few in a
# real conf; a "billion laughs" document expands a few of them into millions of nodes (freeze copies every one),
# which Go's YAML decoder refuses too (yaml.v3 limits the alias expansion ratio).
MAX_CONF_BYTES = 1 << 20
MAX_ALIASES = 64


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type information
    """SafeLoader that rejects a key given twice in one mapping, as Volcano's Go YAML decoder does, and more than
    MAX_ALIASES aliases."""

    _aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} aliases: not a scheduler conf", self.peek_event().start_mark)
        return super().compose_node(parent, index)


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


def load_yaml(text: str, source: str, what: str) -> Any:
    if len(text) > MAX_CONF_BYTES:
        raise ConfError(source, "", f"{what} is {len(text)} characters: more than a ConfigMap holds "
                                    f"({MAX_CONF_BYTES} bytes)")
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}" if mark is not None else "unknown line"
        problem = err.problem or err.context or "invalid YAML"
        raise ConfError(source, "", f"invalid YAML in {what} at {line}: {problem}") from None
    except yaml.YAMLError as err:
        raise ConfError(source, "", f"YAML error in {what}: {err}") from None


def freeze(value: Any) -> Any:
    """Read-only deep copy: mappings become MappingProxyType, lists become tuples, scalars stay as given."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def unwrap_configmap(doc: Any, source: str) -> tuple[str, str] | None:
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
