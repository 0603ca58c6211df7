"""Fuzz: the scheduler conf file (`volcano-scheduler.conf`, or a whole ConfigMap manifest).

parse_conf either returns a SchedulerConf or raises ConfError naming the field; never anything else. A conf it
accepts must also run: one scheduling cycle with it on a small cluster does not raise (plugin arguments are
parsed into typed values by parse_conf; a bad one it let through would fail every cycle).
"""

from __future__ import annotations

import yaml
from hypothesis import given, strategies as st
from strategies import FUZZ, json_values

from scheduler.actions import ACTIONS
from scheduler.cycle import conf_from_text, run_cycle
from scheduler.framework.conf import ConfError
from scheduler.plugins.registry import PLUGINS
from scheduler.testing import cluster

ARGUMENTS = [
    "binpack.weight", "binpack.resources", "binpack.cpu", "binpack.nvidia.com/gpu", "deviceshare.policy",
    "deviceshare.weight", "deviceshare.halfLife", "leastrequested.weight", "mostrequested.weight",
    "balancedresource.weight", "overcommit-factor", "overcommit-factor.cpu", "solver.timeLimitMs",
    "solver.cycleBudgetMs", "solver.workers", "topology.zoneLabel", "topology.rackLabel", "topology.nvlinkLabel",
    "topology.hypernodes", "nodeaffinity.weight", "podaffinity.weight",
]
SWITCHES = ["enableJobOrder", "enableQueueOrder", "enableTaskOrder", "enablePredicate", "enableNodeOrder",
            "enableJobReady", "enableJobPipelined", "enableJobEnqueued", "enabledAllocatable", "enabledOverused",
            "enablePreemptable", "enableReclaimable", "enableJobStarving", "enablePreemptive", "enableHierarchy"]
NAMES = [*PLUGINS, "tdm", "sla", "numaaware", "nosuchplugin", "", "Gang"]

def mostly(valid, rare=None):
    """Usually `valid`, one time in eight `rare` (any JSON value): deep fields are reached, not only the top."""
    rare = json_values if rare is None else rare
    return st.integers(0, 7).flatmap(lambda i: rare if i == 0 else valid)


small_values = st.one_of(
    st.integers(-5, 100), st.floats(-1, 10, allow_nan=False), st.booleans(), st.none(),
    st.sampled_from(["", "1", "0.5", "abc", "cpu,memory", "nvidia.com/gpu", "fgd-weighted", "-1", "1e999"]),
    json_values,
)
plugin_entry = st.fixed_dictionaries(
    {"name": mostly(st.sampled_from(NAMES))},
    optional={
        "arguments": mostly(st.dictionaries(st.sampled_from(ARGUMENTS), small_values, max_size=4)),
        **{s: mostly(st.booleans()) for s in SWITCHES},
    },
)
actions = mostly(
    st.lists(st.sampled_from([*ACTIONS, "shuffle", "", " allocate"]), max_size=6, unique=True).map(", ".join),
)
conf_docs = st.fixed_dictionaries(
    {
        "actions": actions,
        "tiers": mostly(st.lists(st.fixed_dictionaries({"plugins": mostly(
            st.lists(plugin_entry, min_size=1, max_size=5))}), min_size=1, max_size=3)),
    },
    optional={
        "configurations": st.one_of(st.lists(st.fixed_dictionaries(
            {"name": st.one_of(st.sampled_from(list(ACTIONS)), json_values),
             "arguments": st.one_of(st.dictionaries(st.text(max_size=10), small_values, max_size=3),
                                    json_values)}), max_size=2), json_values),
        "metrics": json_values,
        "unknown": json_values,
    },
)


def as_text(doc, wrap: bool) -> str:
    text = yaml.safe_dump(doc)
    if wrap:
        return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                               "data": {"volcano-scheduler.conf": text}})
    return text


def parse(text: str):
    return conf_from_text(text, source="fuzz.conf")


def small_cluster():
    return (cluster().node("n1", cpu="8", gpu=4).node("n2", cpu="8", gpu=4)
            .job("g", min_available=2, replicas=2, gpu=2).job("h", min_available=1, replicas=3, cpu="1"))


@FUZZ
@given(st.one_of(st.text(max_size=300), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_arbitrary_text_raises_only_conf_error(text):
    try:
        parse(text)
    except ConfError as exc:
        assert "fuzz.conf" in str(exc)


@FUZZ
@given(conf_docs, st.booleans())
def test_a_conf_is_rejected_with_conf_error_or_runs_a_cycle(doc, wrap):
    try:
        conf = parse(as_text(doc, wrap))
    except ConfError as exc:
        assert "fuzz.conf" in str(exc)
        return
    c = small_cluster()
    run_cycle(c.sim.snapshot(), conf)


def test_a_bad_plugin_argument_is_rejected_when_the_file_is_loaded(tmp_path):
    """Found by the fuzzer: `binpack.weight: abc` passed parse_conf and then failed every cycle."""
    from scheduler.cycle import load_conf

    path = tmp_path / "volcano-scheduler.conf"
    path.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: binpack\n'
                    "    arguments: {binpack.weight: abc}\n")
    try:
        load_conf(str(path))
    except ConfError as exc:
        assert "binpack.weight" in str(exc)
    else:
        raise AssertionError("a bad plugin argument was accepted")


def test_a_conf_naming_only_plugins_volcano_py_skips_still_runs_a_cycle():
    """Found by the fuzzer: tiers with only `tdm` (a Volcano plugin volcano-py skips) failed every cycle."""
    conf = parse('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: tdm\n')
    run_cycle(small_cluster().sim.snapshot(), conf)
