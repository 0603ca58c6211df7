"""Layer `controllers`: reading one YAML entry of a ConfigMap, bounded, for the controllers that take their conf
from one (the sharding controller's `sharding.yaml`, HyperNode discovery's `volcano-controller.conf`).

Each caller names its own error type, so a bad entry reaches its one log line with the caller's wording, and the
caller keeps its last good conf."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import yaml

T = TypeVar("T")


def entry_text(cm: Mapping[str, object], key: str, error: Callable[[str], Exception]) -> str:
    """The text under `data[key]`, or `error` when the ConfigMap has no such text entry."""
    data = cm.get("data")
    text = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        raise error(f"no key {key} in the ConfigMap")
    return text


def load_yaml(text: str, *, what: str, limit: int, error: Callable[[str], Exception]) -> object:
    """One YAML document of at most `limit` characters (a ConfigMap holds 1 MiB), or `error` naming `what`."""
    if len(text) > limit:
        raise error(f"{what} is {len(text)} bytes, more than a ConfigMap holds ({limit})")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{what} is not YAML: {' '.join(str(exc).split())[:200]}") from None
