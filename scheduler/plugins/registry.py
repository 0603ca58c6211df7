"""Layer `plugins`: the built-in plugins, by the name a volcano-scheduler.conf uses, and their argument parsers."""

from __future__ import annotations

from scheduler.framework.conf_args import ArgsParser
from scheduler.framework.plugin import Plugin
from scheduler.framework.runtime import check_plugin_class
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.capacity import CapacityPlugin
from scheduler.plugins.cdp import CdpPlugin
from scheduler.plugins.conformance import ConformancePlugin
from scheduler.plugins.deviceshare import DeviceSharePlugin
from scheduler.plugins.drf import DrfPlugin
from scheduler.plugins.gang import GangPlugin
from scheduler.plugins.minruntime import MinRuntimePlugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.overcommit import OvercommitPlugin
from scheduler.plugins.pdb import PdbPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.priority import PriorityPlugin
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.plugins.resourcequota import ResourceQuotaPlugin
from scheduler.plugins.sla import SlaPlugin
from scheduler.plugins.topology import NetworkTopologyAwarePlugin
from scheduler.plugins.victimcost import VictimCostPlugin

PLUGINS: dict[str, type[Plugin[object]]] = {
    plugin.name: plugin
    for plugin in (
        PriorityPlugin,
        GangPlugin,
        ConformancePlugin,
        PredicatesPlugin,
        ProportionPlugin,
        CapacityPlugin,
        SlaPlugin,
        DrfPlugin,
        OvercommitPlugin,
        NodeOrderPlugin,
        BinpackPlugin,
        DeviceSharePlugin,
        NetworkTopologyAwarePlugin,
        PdbPlugin,
        CdpPlugin,
        ResourceQuotaPlugin,
        MinRuntimePlugin,
        VictimCostPlugin,
    )
}

# Plugins of volcano-py's own, beyond Volcano's (no Volcano plugin of that name; rules Volcano does not have).
OWN_PLUGINS = frozenset({MinRuntimePlugin.name, VictimCostPlugin.name})

for _plugin in PLUGINS.values():  # a misspelt point or a stray public method fails here, at import
    check_plugin_class(_plugin)

# What the conf loader calls once per plugin entry, when a file is loaded (scheduler.framework.conf_args).
PLUGIN_ARGS: dict[str, ArgsParser] = {name: plugin.parse_args for name, plugin in PLUGINS.items()}
