"""Layer `controllers`: the HyperNode discovery conf, read as Volcano's hypernode controller reads it.

Where: the ConfigMap `<HELM_RELEASE_NAME>-controller-configmap` in `KUBE_POD_NAMESPACE` (defaults `volcano` and
`volcano-system`), key `volcano-controller.conf` (Volcano: pkg/controllers/hypernode/config/loader.go and
configmap_handler.go `setConfigMapNamespaceAndName`). What: `networkTopologyDiscovery`, a list of sources; only
an enabled `source: label` is acted on here (api/types.go `GetDiscoveryConfig`), its `config.networkTopologyTypes`
a map of topology names to label lists, top tier first and the node's own label (kubernetes.io/hostname) last
(discovery/label/label.go `parseCfg`: the last entry is dropped, the rest reversed so tier 1 is the lowest).

Hostile input, parsed once here: a conf that is not that shape raises `ConfError` (the caller keeps the last good
one); a topology Volcano would skip (name over 20 characters, a repeated label) is skipped with a note, and so is
one whose labels or name could not make a valid HyperNode; another source is a note (logged once by the caller).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.controllers.configmap import load_yaml

CONF_KEY = "volcano-controller.conf"
NAMESPACE_ENV, RELEASE_ENV = "KUBE_POD_NAMESPACE", "HELM_RELEASE_NAME"
DEFAULT_NAMESPACE, DEFAULT_RELEASE = "volcano-system", "volcano"
LABEL_SOURCE = "label"
MAX_TYPE_NAME = 20  # label.go networkTopologyTypeLength
MAX_TIER_NAME = 253  # the CRD's spec.tierName maxLength
MAX_TIERS = 16
MAX_TOPOLOGIES = 64
MAX_CONF_BYTES = 256 * 1024
# A qualified label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ConfError(ValueError):
    """The conf cannot be read as Volcano's `NetworkTopologyConfig`: the last good one stays."""


@dataclass(frozen=True, slots=True)
class ConfigMapRef:
    namespace: str
    name: str
    key: str = CONF_KEY

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ConfigMapRef:
        namespace = environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE
        release = environ.get(RELEASE_ENV) or DEFAULT_RELEASE
        return cls(namespace, f"{release}-controller-configmap")


@dataclass(frozen=True, slots=True)
class LabelTopology:
    """One `networkTopologyTypes` entry: `tiers[0]` is tier 1's label key (the leaf HyperNodes')."""

    name: str
    tiers: tuple[str, ...]

    @property
    def cleaned(self) -> str:
        """The name as it appears in generated HyperNode names (label.go `cleanString`)."""
        return clean_name(self.name)


@dataclass(frozen=True, slots=True)
class DiscoveryConf:
    """`label`: the enabled label source's topologies, sorted by name; None when that source is not enabled (then
    discovery does nothing and the HyperNodes it made stay, as Volcano's stopped discoverer leaves them)."""

    label: tuple[LabelTopology, ...] | None
    notes: tuple[str, ...] = ()

    @property
    def label_keys(self) -> frozenset[str]:
        return frozenset(key for topology in self.label or () for key in topology.tiers)


NO_DISCOVERY = DiscoveryConf(None)


def clean_name(name: str) -> str:
    """ASCII letters lowered, digits, '.' and '-' kept, anything else '-' (label.go `cleanString`)."""
    out = []
    for c in name:
        if c.isascii() and c.isalpha():
            out.append(c.lower())
        elif (c.isascii() and c.isdigit()) or c in ".-":
            out.append(c)
        else:
            out.append("-")
    return "".join(out)


def valid_label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return bool(_LABEL_NAME.match(name))


def parse(text: str) -> DiscoveryConf:
    """`volcano-controller.conf`'s text -> the discovery conf; ConfError when it is not that shape."""
    doc = load_yaml(text, what=CONF_KEY, limit=MAX_CONF_BYTES, error=ConfError)
    if doc is None:
        return NO_DISCOVERY
    if not isinstance(doc, dict):
        raise ConfError(f"{CONF_KEY} is not a mapping")
    sources = doc.get("networkTopologyDiscovery")
    if sources is None:
        return NO_DISCOVERY
    if not isinstance(sources, list):
        raise ConfError("networkTopologyDiscovery is not a list")
    notes: list[str] = []
    label: tuple[LabelTopology, ...] | None = None
    for index, entry in enumerate(sources):
        source, enabled, config = _source(index, entry)
        if not enabled:
            continue
        if source != LABEL_SOURCE:
            notes.append(f"networkTopologyDiscovery source {source!r} is not supported by volcano-py: skipped")
            continue
        if label is None:  # GetDiscoveryConfig: the first enabled entry of a source wins
            label = _label_topologies(config, notes)
    return DiscoveryConf(label, tuple(notes))


def _source(index: int, entry: Any) -> tuple[str, bool, Any]:
    if not isinstance(entry, dict):
        raise ConfError(f"networkTopologyDiscovery[{index}] is not a mapping")
    source, enabled = entry.get("source", ""), entry.get("enabled", False)
    if not isinstance(source, str):
        raise ConfError(f"networkTopologyDiscovery[{index}].source is not a string")
    if not isinstance(enabled, bool):
        raise ConfError(f"networkTopologyDiscovery[{index}].enabled is not a boolean")
    return source, enabled, entry.get("config")


def _label_topologies(config: Any, notes: list[str]) -> tuple[LabelTopology, ...]:
    if config is None:
        return ()
    if not isinstance(config, dict):
        raise ConfError("the label source's config is not a mapping")
    types = config.get("networkTopologyTypes")
    if types is None:
        return ()
    if not isinstance(types, dict):
        raise ConfError("networkTopologyTypes is not a mapping")
    if len(types) > MAX_TOPOLOGIES:
        raise ConfError(f"networkTopologyTypes has {len(types)} entries, more than {MAX_TOPOLOGIES}")
    topologies = []
    for name, labels in types.items():
        topology = _topology(str(name), labels)
        if isinstance(topology, str):
            notes.append(f"networkTopologyTypes {str(name)[:64]!r} skipped: {topology}")
        else:
            topologies.append(topology)
    return tuple(sorted(topologies, key=lambda t: t.name))


def _topology(name: str, labels: Any) -> LabelTopology | str:
    """The topology, or why it is skipped."""
    if len(name) > MAX_TYPE_NAME:
        return f"its name is longer than {MAX_TYPE_NAME} characters"  # label.go parseCfg
    if not _DNS_SUBDOMAIN.match(f"hypernode-{clean_name(name)}-tier1-bcdfg"):
        return "its name cannot make a valid HyperNode name"
    if not isinstance(labels, list):
        return "it is not a list of {nodeLabel: ...}"
    keys = []
    for entry in labels:
        key = entry.get("nodeLabel") if isinstance(entry, dict) else None
        if not isinstance(key, str) or not key:
            return "an entry has no nodeLabel string"
        if len(key) > MAX_TIER_NAME or not valid_label_key(key):
            return f"{key[:64]!r} is not a label key (at most {MAX_TIER_NAME} characters)"
        keys.append(key)
    if len(set(keys)) != len(keys):
        return "there are duplicate labels"  # label.go checkLabels
    if len(keys) - 1 > MAX_TIERS:
        return f"more than {MAX_TIERS} tiers"
    # The last label is the node's own (kubernetes.io/hostname): no HyperNode for it; tier 1 is the one above.
    return LabelTopology(name, tuple(reversed(keys[:-1])))
