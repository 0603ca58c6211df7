"""Every volcano-scheduler conf Volcano ships loads here, and the argument table agrees with Volcano's source.

1. `scheduler/framework/volcano_args.py` lists, per plugin volcano-py implements, the argument keys Volcano's
   plugin reads: re-read here from the snapshot's `pkg/scheduler/plugins/<plugin>/*.go` (the constants or
   literals passed to `GetInt/GetBool/GetFloat64/GetString`, `framework.Get[T]` or `args[...]`).
2. Every conf in the snapshot's installer (the chart's `config/*.conf`, the ConfigMaps of the rendered
   `installer/*.yaml` manifests, the commented override example in the chart's values) and the examples in
   Volcano's own source (`pkg/**/*.go`: the built-in defaults and the plugins' documented confs) loads, with the
   ignored keys listed below; or is rejected for a reason Volcano also rejects it (REJECTED, empty today). The
   snapshot has no `docs/` and no conf under `config/` (only CRDs): test_every_conf_file_in_the_snapshot_is_read
   fails the day one appears, as it does for any new file with `actions:`. `volcano-py conf check` is run once
   through the command line on Volcano's CI conf.

The snapshot is found as tests/test_volcano_metrics.py finds it: $VOLCANO_SRC, else ../shared beside the
checkout, else /work/shared. Without it these tests fail and say so; they never skip.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from scheduler.cli import main
from scheduler.cycle import load_conf
from scheduler.framework.conf import (
    ConfError,
    KeyKind,
    KeyPlace,
    KeyWarning,
    SchedulerConf,
    describe_conf,
)
from scheduler.framework.volcano_args import (
    VOLCANO_DECLARED_UNREAD,
    VOLCANO_PLUGIN_ARG_PREFIXES,
    VOLCANO_PLUGIN_ARGS,
)
from scheduler.plugins.registry import OWN_PLUGINS, PLUGINS
from scheduler.testing import volcano_snapshot

ROOT = Path(__file__).resolve().parents[2]
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the manifests are 9000 lines each




VOLCANO = volcano_snapshot()
PLUGINS_GO = VOLCANO / "pkg" / "scheduler" / "plugins"


def snapshot(path: Path) -> Path:
    assert path.exists(), f"{path} is missing: these tests need the Volcano snapshot at {VOLCANO}"
    return path


# ---- 1. the argument table against Volcano's source ----------------------------------------------------------
CONSTANT = re.compile(r'\b(\w+)\s*=\s*"([^"]*)"')
PREFIX_CONSTANT = re.compile(r'\b(\w+)\s*=\s*(\w+)\s*\+\s*"([^"]*)"')
READS = (
    re.compile(r'\.Get(?:Int|Float64|Bool|String)\(\s*&[^,]+,\s*(\w+|"[^"]*")\s*\)'),
    re.compile(r'\bframework\.Get\[.*?\]\(\s*\w+\s*,\s*(\w+|"[^"]*")\s*\)'),
    re.compile(r'\b(?:arguments|args|rawArgs|pluginArguments)\[(\w+|"[^"]*")\]'),
)


@dataclass(frozen=True)
class GoArgs:
    read: frozenset[str]  # fixed keys read
    dynamic: frozenset[str]  # identifiers read that are no constant (a key built at run time)
    prefixes: frozenset[str]  # constants built as `OtherConstant + "."`
    declared: frozenset[str]  # every string constant


@cache
def go_args(plugin: str) -> GoArgs:
    sources = [path.read_text() for path in sorted(snapshot(PLUGINS_GO / plugin).glob("*.go"))
               if not path.name.endswith("_test.go")]
    text = "\n".join(sources)
    constants = dict(CONSTANT.findall(text))
    prefixes = {name: constants.get(base, "") + suffix for name, base, suffix in PREFIX_CONSTANT.findall(text)}
    read, dynamic = set(), set()
    for pattern in READS:
        for operand in pattern.findall(text):
            if operand.startswith('"'):
                read.add(operand.strip('"'))
            elif operand in constants:
                read.add(constants[operand])
            else:
                dynamic.add(operand)
    return GoArgs(frozenset(read), frozenset(dynamic), frozenset(prefixes.values()), frozenset(constants.values()))


def test_the_table_covers_exactly_the_plugins_volcano_py_implements() -> None:
    assert set(VOLCANO_PLUGIN_ARGS) == set(PLUGINS) - OWN_PLUGINS


@pytest.mark.parametrize("plugin", sorted(set(PLUGINS) - OWN_PLUGINS))
def test_the_table_lists_the_keys_volcanos_plugin_reads(plugin: str) -> None:
    found = go_args(plugin)
    assert VOLCANO_PLUGIN_ARGS[plugin] == found.read
    assert set(VOLCANO_PLUGIN_ARG_PREFIXES.get(plugin, {})) <= found.prefixes
    assert set(VOLCANO_PLUGIN_ARG_PREFIXES.get(plugin, {}).values()) <= found.read  # the listing keys
    assert bool(found.dynamic) == (plugin in VOLCANO_PLUGIN_ARG_PREFIXES)  # a key built at run time: a prefix
    for key in VOLCANO_DECLARED_UNREAD.get(plugin, frozenset()):
        assert key in found.declared and key not in found.read


# ---- 2. every conf in the snapshot ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VolcanoConf:
    source: str  # where in the snapshot: a path, with `:line` or `#ConfigMap/key` when taken out of a file
    text: str


def chart_files() -> Iterator[VolcanoConf]:
    for path in sorted(snapshot(VOLCANO / "installer/helm/chart/volcano/config").glob("*.conf")):
        if "actions:" in path.read_text():  # not volcano-admission.conf, the webhook's
            yield VolcanoConf(str(path.relative_to(VOLCANO)), path.read_text())


def manifest_configmaps() -> Iterator[VolcanoConf]:
    """The `.conf` keys of every ConfigMap in the rendered manifests (installer/*.yaml, many documents each)."""
    for path in sorted(snapshot(VOLCANO / "installer").glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=SafeLoader):
            if not isinstance(doc, dict) or doc.get("kind") != "ConfigMap":
                continue
            for key, text in (doc.get("data") or {}).items():
                if key.endswith(".conf") and "actions:" in text:
                    yield VolcanoConf(f"{path.relative_to(VOLCANO)}#{doc['metadata']['name']}/{key}", text)


def values_example() -> Iterator[VolcanoConf]:
    """The chart's commented `scheduler_config_override` example, uncommented."""
    path = snapshot(VOLCANO / "installer/helm/chart/volcano/values.yaml")
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#  scheduler_config_override: |"))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("#    "):
            break
        body.append(line[len("#    "):])
    yield VolcanoConf(f"{path.relative_to(VOLCANO)}:{start + 2}", "\n".join(body) + "\n")


ACTIONS_LINE = re.compile(r'^(?P<lead>\s*(?://)?\s*)actions:\s*"')


def go_examples() -> Iterator[VolcanoConf]:
    """Confs in Volcano's Go source: the built-in defaults (string literals) and the plugins' documented examples
    (comments). A block starts at `actions: "` and runs while lines keep its comment marker and indentation."""
    for path in sorted(snapshot(VOLCANO / "pkg").rglob("*.go")):
        if path.name.endswith("_test.go"):
            continue
        lines = [line.expandtabs(4) for line in path.read_text().splitlines()]
        for number, line in enumerate(lines, start=1):
            match = ACTIONS_LINE.match(line)
            if match:
                yield VolcanoConf(f"{path.relative_to(VOLCANO)}:{number}", _go_block(lines[number - 1:], match))


def _go_block(lines: list[str], match: re.Match[str]) -> str:
    comment = "//" in match["lead"]
    column = len(match["lead"])
    body = []
    for line in lines:
        if comment:
            if not line.lstrip().startswith("//"):
                break
            line = line.replace("//", "  ", 1)
        rest = line[column:] if line[:column].strip() == "" else None
        if rest is None or (rest and not rest.startswith((" ", "-", "actions:", "tiers:", "configurations:"))):
            if line.strip():
                break
            rest = ""
        body.append(rest)
    return "\n".join(body).rstrip() + "\n"


@cache
def volcano_confs() -> tuple[VolcanoConf, ...]:
    return (*chart_files(), *manifest_configmaps(), *values_example(), *go_examples())


def entry(where: str, plugin: str, key: str, kind: KeyKind, place: KeyPlace = KeyPlace.ARGUMENT,
          suggestion: str = "") -> KeyWarning:
    return KeyWarning(where, key, kind, place, plugin, suggestion)


UNKNOWN, UNSUPPORTED, IGNORES = KeyKind.UNKNOWN, KeyKind.UNSUPPORTED, KeyKind.VOLCANO_IGNORES
NODEORDER = "tiers[1].plugins[3]"

# Every conf found, with the keys volcano-py ignores in it (as values); () = none.
LOADS: dict[str, tuple[KeyWarning, ...]] = {
    "installer/helm/chart/volcano/config/agent-scheduler.conf": (),
    # predicate.DynamicResourceAllocationEnable: true, which volcano-py's predicates read (DRA, docs/dra.md)
    "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf": (),
    "installer/helm/chart/volcano/config/volcano-scheduler.conf": (),
    "installer/volcano-agent-scheduler-development.yaml#volcano-agent-scheduler-configmap/agent-scheduler.conf": (),
    "installer/volcano-development-vap-map.yaml#volcano-scheduler-configmap/volcano-scheduler.conf": (),
    "installer/volcano-development-vap.yaml#volcano-scheduler-configmap/volcano-scheduler.conf": (),
    "installer/volcano-development.yaml#volcano-scheduler-configmap/volcano-scheduler.conf": (),
    "installer/helm/chart/volcano/values.yaml:86": (),
    "pkg/agentscheduler/util.go:34": (),
    "pkg/scheduler/util.go:39": (),
    "pkg/scheduler/plugins/binpack/binpack.go:99": (),
    # Volcano-only plugins are skipped whole, arguments and all: nothing of theirs to warn about key by key.
    "pkg/scheduler/plugins/extender/extender.go:104": (),
    "pkg/scheduler/plugins/nodegroup/nodegroup.go:45": (),
    "pkg/scheduler/plugins/nodeorder/nodeorder.go:118": (
        entry(NODEORDER, "nodeorder", "podaffinity.weight", UNSUPPORTED),
        entry(NODEORDER, "nodeorder", "imagelocality.weight", UNSUPPORTED),
        entry(NODEORDER, "nodeorder", "podtopologyspread.weight", UNSUPPORTED)),
    # Volcano's own examples put the argument beside `arguments:`, not under it: yaml.v2 ignores the key, and
    # the plugin runs with its default; volcano-py does the same and says so.
    "pkg/scheduler/plugins/overcommit/overcommit.go:67": (
        entry("tiers[0].plugins[0]", "overcommit", "overcommit-factor", UNKNOWN, KeyPlace.FIELD),),
    "pkg/scheduler/plugins/resource-strategy-fit/resource_strategy_fit.go:102": (),
    "pkg/scheduler/plugins/sla/sla.go:69": (
        entry("tiers[0].plugins[0]", "sla", "sla-waiting-time", UNKNOWN, KeyPlace.FIELD),),
    "pkg/scheduler/plugins/task-topology/util.go:54": (),
    "pkg/scheduler/plugins/tdm/tdm.go:47": (),
    "pkg/scheduler/plugins/usage/usage.go:46": (),
}

# Confs Volcano ships that are rejected here, each for a reason Volcano rejects it too (the problem, as ConfError
# says it).
ELIDED = "pkg/scheduler/plugins/predicates/helper.go:77"
REJECTED: dict[str, str] = {
    # A documented example that ends its arguments with a `...` line ("and so on"): not YAML, so yaml.v2 fails
    # on it as PyYAML does. Without that line it loads: test_volcanos_elided_example_loads_without_its_elision.
    ELIDED: "invalid YAML in the file at line 18: could not find expected ':'",
}

# Files with `actions:` that hold no conf of their own, and where their conf is read instead.
NOT_A_CONF = {
    # The Helm templates are Go templates, not YAML; their rendering is installer/*-development.yaml.
    "installer/helm/chart/volcano/templates/agent_scheduler.yaml": "installer/volcano-agent-scheduler-development",
}


def test_every_conf_in_the_snapshot_is_judged() -> None:
    assert sorted(conf.source for conf in volcano_confs()) == sorted({**LOADS, **REJECTED})


def test_every_conf_file_in_the_snapshot_is_read() -> None:
    """What `grep -rl "actions:" --include=*.conf --include=*.yaml --include=*.md` finds in installer/, config/
    and docs/ is read above, or is a template whose rendering is."""
    found = {str(path.relative_to(VOLCANO)) for folder in ("installer", "config", "docs")
             for pattern in ("*.conf", "*.yaml", "*.md") for path in (VOLCANO / folder).rglob(pattern)
             if "actions:" in path.read_text(errors="replace")}
    read = {conf.source.split("#")[0].split(":")[0] for conf in volcano_confs()}
    assert found - read == set(NOT_A_CONF)


def load_text(conf: VolcanoConf, tmp_path: Path) -> SchedulerConf:
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(conf.text)
    return load_conf(str(path))


@pytest.mark.parametrize("conf", volcano_confs(), ids=lambda c: c.source)
def test_each_volcano_conf_loads_or_is_rejected_as_volcano_rejects_it(conf: VolcanoConf, tmp_path: Path) -> None:
    if conf.source in REJECTED:
        with pytest.raises(ConfError) as caught:
            load_text(conf, tmp_path)
        assert caught.value.problem == REJECTED[conf.source]
        return
    loaded = load_text(conf, tmp_path)
    assert loaded.actions and loaded.tiers
    assert loaded.key_warnings == LOADS[conf.source]


def test_conf_check_prints_what_the_loader_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = snapshot(VOLCANO / "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf")
    assert main(["conf", "check", str(path)]) == 0
    printed = capsys.readouterr().out
    conf = load_conf(str(path))
    assert printed == describe_conf(conf) + "\n"
    # the CI conf's predicate.DynamicResourceAllocationEnable takes effect: no warning, the predicates' DRA is on
    (predicates,) = [o for t in conf.tiers for o in t.plugins if o.name == "predicates"]
    assert predicates.args.dra and not conf.key_warnings


def test_volcanos_elided_example_loads_without_its_elision(tmp_path: Path) -> None:
    conf = next(conf for conf in volcano_confs() if conf.source == ELIDED)
    lines = [line for line in conf.text.splitlines() if line.strip() != "..."]
    assert len(lines) == len(conf.text.splitlines()) - 1
    loaded = load_text(VolcanoConf(ELIDED, "\n".join(lines) + "\n"), tmp_path)
    assert loaded.key_warnings == tuple(
        entry("tiers[0].plugins[0]", "predicates", key, UNSUPPORTED)
        for key in ("volumebinding.bindTimeoutSeconds", "volumebinding.weight", "volumebinding.shape"))
