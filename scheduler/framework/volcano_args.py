"""Layer `framework`: the plugin arguments Volcano's own plugins read, so a key volcano-py ignores is named rightly.

When a conf entry carries an argument volcano-py's plugin does not ask for, the loader warns; this table tells
which warning: Volcano's plugin of that name reads it (volcano-py does not support it), Volcano declares it but
reads nothing for it either, or nobody knows it (a typo, with the closest known name suggested).

Hand-checked against the Volcano snapshot (peers/volcano, pkg/scheduler/plugins/<plugin>/*.go): each list names
the file its keys come from, as the constant or literal passed to `args.GetInt/GetBool/GetFloat64/GetString`,
`framework.Get[T](args, key)` or `args[key]`. tests/framework/test_conf_warnings.py re-reads those files and fails
when a read key is missing here or a key here is no longer read. Only the plugins volcano-py implements are
listed: an entry of any other Volcano plugin is skipped whole (conf.py), arguments and all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# Plugin name -> the argument keys Volcano's plugin reads (a fixed key, not a prefix).
VOLCANO_PLUGIN_ARGS: Mapping[str, frozenset[str]] = MappingProxyType({
    # binpack/binpack.go: BinpackWeight, BinpackCPU, BinpackMemory, BinpackResources
    "binpack": frozenset({"binpack.weight", "binpack.cpu", "binpack.memory", "binpack.resources"}),
    # capacity/capacity.go: DynamicResourceAllocationEnable, DRAConsumableCapacityEnable, ancestorReclaimLevelKey
    "capacity": frozenset({"capacity.DynamicResourceAllocationEnable", "capacity.DRAConsumableCapacityEnable",
                           "ancestorReclaimLevel"}),
    # cdp/cdp.go reads no argument
    "cdp": frozenset(),
    # conformance/conformance.go reads no argument
    "conformance": frozenset(),
    # deviceshare/deviceshare.go: GPUSharingPredicate, GPUNumberPredicate, NodeLockEnable, VGPUEnable,
    # AscendMindClusterVNPU, AscendHAMiVNPUEnable, SchedulePolicyArgument, ScheduleWeight,
    # KnownGeometriesCMName, KnownGeometriesCMNamespace; deviceshare/gpuexclusive.go: GPUExclusiveRulesKey
    "deviceshare": frozenset({
        "deviceshare.GPUSharingEnable", "deviceshare.GPUNumberEnable", "deviceshare.NodeLockEnable",
        "deviceshare.VGPUEnable", "deviceshare.AscendMindClusterVNPUEnable", "deviceshare.AscendHAMiVNPUEnable",
        "deviceshare.SchedulePolicy", "deviceshare.ScheduleWeight", "deviceshare.KnownGeometriesCMName",
        "deviceshare.KnownGeometriesCMNamespace", "deviceshare.GPUExclusiveRules",
    }),
    # drf/drf.go reads no argument (its enableHierarchy is a switch: VOLCANO_PLUGIN_SWITCHES)
    "drf": frozenset(),
    # gang/gang.go reads no argument
    "gang": frozenset(),
    # network-topology-aware/network_topology_aware.go: NetworkTopologyWeight, HyperNodeBinPackCPU,
    # HyperNodeBinPackMemory, HyperNodeBinPackResources, HyperNodeBinPackNormalPodEnable,
    # HyperNodeBinPackNormalPodFading, HyperNodeGradientEvictMaxHyperNodes
    "network-topology-aware": frozenset({
        "weight", "hypernode.binpack.cpu", "hypernode.binpack.memory", "hypernode.binpack.resources",
        "hypernode.binpack.normal-pod.enable", "hypernode.binpack.normal-pod.fading",
        "hypernode.gradient.evict.max-hypernodes",
    }),
    # nodeorder/nodeorder.go: NodeAffinityWeight, PodAffinityWeight, LeastRequestedWeight, MostRequestedWeight,
    # BalancedResourceWeight, TaintTolerationWeight, ImageLocalityWeight, PodTopologySpreadWeight
    "nodeorder": frozenset({
        "nodeaffinity.weight", "podaffinity.weight", "leastrequested.weight", "mostrequested.weight",
        "balancedresource.weight", "tainttoleration.weight", "imagelocality.weight", "podtopologyspread.weight",
    }),
    # pdb/pdb.go keeps its arguments but reads none
    "pdb": frozenset(),
    # resourcequota/resourcequota.go keeps its arguments but reads none
    "resourcequota": frozenset(),
    # overcommit/overcommit.go: overCommitFactor
    "overcommit": frozenset({"overcommit-factor"}),
    # predicates/predicates.go: NodeAffinityEnable, NodePortsEnable, TaintTolerationEnable, PodAffinityEnable,
    # NodeVolumeLimitsEnable, VolumeZoneEnable, PodTopologySpreadEnable, VolumeBindingEnable, CachePredicate;
    # predicates/helper.go: volumeBindingWeightKey, volumeBindingTimeoutSecondsKey, volumeBindingShapeKey,
    # draFilterTimeoutSecondsKey
    "predicates": frozenset({
        "predicate.NodeAffinityEnable", "predicate.NodePortsEnable", "predicate.TaintTolerationEnable",
        "predicate.PodAffinityEnable", "predicate.NodeVolumeLimitsEnable", "predicate.VolumeZoneEnable",
        "predicate.PodTopologySpreadEnable", "predicate.VolumeBindingEnable", "predicate.CacheEnable",
        "volumebinding.weight", "volumebinding.bindTimeoutSeconds", "volumebinding.shape",
        "dynamicresources.filterTimeoutSeconds",
    }),
    # priority/priority.go reads no argument
    "priority": frozenset(),
    # proportion/proportion.go reads no argument
    "proportion": frozenset(),
    # sla/sla.go: JobWaitingTime
    "sla": frozenset({"sla-waiting-time"}),
})

# Keys read under a prefix, one per name listed in another argument (prefix -> the listing key): binpack/binpack.go
# reads `binpack.resources.<name>` (BinpackResourcesPrefix) for each name in `binpack.resources`, and
# network-topology-aware/network_topology_aware.go the same under HyperNodeBinPackResourcesPrefix.
VOLCANO_PLUGIN_ARG_PREFIXES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "binpack": MappingProxyType({"binpack.resources.": "binpack.resources"}),
    "network-topology-aware": MappingProxyType({"hypernode.binpack.resources.": "hypernode.binpack.resources"}),
})

# Declared as an argument key by Volcano's plugin but read by nothing: predicates/predicates.go declares
# DynamicResourceAllocationEnable, yet takes the DynamicResourceAllocation feature gate instead.
VOLCANO_DECLARED_UNREAD: Mapping[str, frozenset[str]] = MappingProxyType({
    "predicates": frozenset({"predicate.DynamicResourceAllocationEnable"}),
})

# Plugin-entry switches that a plugin reads itself, rather than the framework at an extension point:
# `enableHierarchy` (framework/session.go HierarchyEnabled), read by drf/drf.go, capacity/capacity.go and
# nodegroup/nodegroup.go.
VOLCANO_PLUGIN_SWITCHES: Mapping[str, frozenset[str]] = MappingProxyType({
    "enableHierarchy": frozenset({"drf", "capacity", "nodegroup"}),
})


class VolcanoReads(enum.Enum):
    """What Volcano's plugin does with an argument key."""

    READS = "reads"
    DECLARES_ONLY = "declares-only"
    UNKNOWN = "unknown"


def _listed(arguments: Mapping[str, Any], listing: str) -> frozenset[str]:
    """The names of a comma-separated listing argument, trimmed, as Volcano splits it."""
    value = arguments.get(listing)
    if not isinstance(value, str):  # Volcano takes a listing that is not a string as empty
        return frozenset()
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def volcano_reads(plugin: str, key: str, arguments: Mapping[str, Any]) -> VolcanoReads:
    """What Volcano's `plugin` does with `key` of an entry whose arguments are `arguments`."""
    if key in VOLCANO_PLUGIN_ARGS.get(plugin, frozenset()):
        return VolcanoReads.READS
    for prefix, listing in VOLCANO_PLUGIN_ARG_PREFIXES.get(plugin, {}).items():
        if key.startswith(prefix) and key[len(prefix):] in _listed(arguments, listing):
            return VolcanoReads.READS
    if key in VOLCANO_DECLARED_UNREAD.get(plugin, frozenset()):
        return VolcanoReads.DECLARES_ONLY
    return VolcanoReads.UNKNOWN


def listing_of(plugin: str, key: str) -> str:
    """The listing argument (`binpack.resources`) that must name the resource of a per-resource key, or ""."""
    for prefix, listing in VOLCANO_PLUGIN_ARG_PREFIXES.get(plugin, {}).items():
        if key.startswith(prefix):
            return listing
    return ""


def volcano_reads_switch(plugin: str, switch: str) -> bool:
    return plugin in VOLCANO_PLUGIN_SWITCHES.get(switch, frozenset())


def volcano_keys(plugin: str) -> frozenset[str]:
    """Every fixed argument key Volcano's plugin of that name knows, for suggesting a misspelt one."""
    return VOLCANO_PLUGIN_ARGS.get(plugin, frozenset()) | VOLCANO_DECLARED_UNREAD.get(plugin, frozenset())
