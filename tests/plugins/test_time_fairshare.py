"""Time-based fair share (proportion's `usage.*` arguments, api/usage.py): the decay rule, the Queue annotation
read at the edge with bounds, the arguments' bounds, and what the history does to shares and placements.

Reference values are computed here from the rule as docs/configuration.md states it (a resource-second `a`
seconds old weighs `2^(-a / halfLife)`; a queue's usage fraction is its decayed usage over what holding the
whole cluster for the window would give; a queue's weight fraction `f` becomes `f + k x (f - u)`), by plain
numeric summation, not by calling the code under test."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.api.convert import queue_from_object
from scheduler.api.field_parsers import BadValueError
from scheduler.api.resources import Resource
from scheduler.api.usage import (
    USAGE_ANNOTATION,
    QueueUsage,
    encode,
    fold,
    parse_usage,
)
from scheduler.cache.status_writer import USAGE_WRITE_PERIOD, _usage_due
from scheduler.cli.ctl.queues import usage_rows
from scheduler.framework.conf_values import ArgumentError
from scheduler.plugins.proportion import ProportionArgs
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"


# ---- references, from the rule ------------------------------------------------------------------------------


def ref_decayed_holding(amount: float, seconds: float, half_life: float, steps: int = 20_000) -> float:
    """`amount` held for the last `seconds`, each instant weighted 2^(-age/half_life): a midpoint sum."""
    dt = seconds / steps
    return sum(amount * 2 ** (-((i + 0.5) * dt) / half_life) * dt for i in range(steps))


def ref_usage_fraction(used_gpu_seconds: float, cluster_gpus: float, half_life: float, window: float) -> float:
    return used_gpu_seconds / ref_decayed_holding(cluster_gpus, window, half_life)


def ref_weights(weights: dict[str, int], usage: dict[str, float], k: float) -> dict[str, float]:
    total = sum(weights.values())
    return {q: max(w / total * 0.01, w / total + k * (w / total - usage.get(q, 0.0))) for q, w in weights.items()}


# ---- the decay ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("elapsed", "half_life"), [(1.0, 60.0), (600.0, 600.0), (7200.0, 1800.0), (30.0, 1e5)])
def test_a_fold_adds_what_was_held_decayed_and_decays_what_was_there(elapsed: float, half_life: float) -> None:
    before = QueueUsage(1000.0, half_life, 1e6, {GPU: 5000.0})
    after = fold(before, Resource.of(scalars={GPU: 4000}), 1000.0 + elapsed, half_life, 1e6)
    expected = 5000.0 * 2 ** (-elapsed / half_life) + ref_decayed_holding(4.0, elapsed, half_life)
    assert after.used[GPU] == pytest.approx(expected, rel=1e-6)
    assert after.at == 1000.0 + elapsed


def test_folding_every_second_equals_folding_once() -> None:
    once = fold(QueueUsage(0.0, 300.0, 1e5, {GPU: 100.0}), Resource.of(scalars={GPU: 2000}), 500.0, 300.0, 1e5)
    stepped = QueueUsage(0.0, 300.0, 1e5, {GPU: 100.0})
    for t in range(1, 501):
        stepped = fold(stepped, Resource.of(scalars={GPU: 2000}), float(t), 300.0, 1e5)
    assert stepped.used[GPU] == pytest.approx(once.used[GPU], rel=1e-9)


def test_a_record_older_than_the_window_is_forgotten() -> None:
    old = QueueUsage(0.0, 600.0, 3600.0, {GPU: 9e6})
    assert fold(old, Resource.of(scalars={GPU: 8000}), 3601.0, 600.0, 3600.0).used == {}
    assert old.decayed_to(3601.0).used == {}


# ---- the annotation, read at the edge -----------------------------------------------------------------------


def queue_obj(name: str, usage: str | None = None, weight: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if usage is not None:
        meta["annotations"] = {USAGE_ANNOTATION: usage}
    return {"metadata": meta, "spec": {"weight": weight}}


def test_the_annotation_round_trips() -> None:
    usage = QueueUsage(1.7e9, 3600.0, 86400.0, {GPU: 123456.0, "cpu": 2.5e6}, 0.25)
    assert queue_from_object(queue_obj("q", encode(usage)), creation=0.0).usage == usage


HOSTILE = [
    ("not JSON", "{", "is not JSON"),
    ("a list", "[1, 2]", "expected a JSON object"),
    ("another version", '{"v": 2, "at": 1, "halfLife": 1, "window": 1}', "v: expected 1"),
    ("a negative amount", '{"v":1,"at":1,"halfLife":1,"window":1,"used":{"nvidia.com/gpu":-1}}', "out of range"),
    ("an infinite time", '{"v":1,"at":1e999,"halfLife":1,"window":1}', "at: out of range"),
    ("an integer too large for a float", '{"v":1,"at":1' + "0" * 400 + ',"halfLife":1,"window":1}',
     "at: out of range"),
    ("an amount too large for a float",
     '{"v":1,"at":1,"halfLife":1,"window":1,"used":{"nvidia.com/gpu":9' + "9" * 400 + "}}", "out of range"),
    ("a zero half-life", '{"v":1,"at":1,"halfLife":0,"window":1}', "halfLife: out of range"),
    ("a boolean amount", '{"v":1,"at":1,"halfLife":1,"window":1,"used":{"x":true}}', "expected a number"),
    ("too many resources",
     '{"v":1,"at":1,"halfLife":1,"window":1,"used":{' + ",".join(f'"r{i}":1' for i in range(17)) + "}}",
     "more than 16 resources"),
    ("deep nesting", "[" * 3000 + "]" * 3000, "longer than 4096"),
    ("deep but short nesting", '{"v":1,"used":' + "[" * 1500 + "]" * 1500 + "}", None),
    ("oversized", '{"v":1,"at":1,"halfLife":1,"window":1,"pad":"' + "x" * 5000 + '"}', "longer than 4096"),
]


@pytest.mark.parametrize(("text", "problem"), [(t, p) for _, t, p in HOSTILE], ids=[n for n, _, _ in HOSTILE])
def test_a_hostile_annotation_gives_a_reason_and_the_queue_starts_from_zero(text: str, problem: str | None) -> None:
    sink: list[Any] = []
    queue = queue_from_object(queue_obj("q", text), creation=0.0, sink=sink)
    assert queue.usage is None
    assert len(sink) == 1
    assert sink[0].path == f"metadata.annotations[{USAGE_ANNOTATION}]"
    assert sink[0].fallback == "no usage history (starts from zero)"
    if problem is not None:
        assert problem in sink[0].problem


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from([10**400, -(10**400), 10**30 + 1]) | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.fixed_dictionaries({"v": st.just(1)}, optional={
    "at": _JSON_VALUES, "halfLife": _JSON_VALUES, "window": _JSON_VALUES,
    "share": _JSON_VALUES, "used": st.dictionaries(st.text(max_size=4), _JSON_VALUES, max_size=4) | _JSON_VALUES,
}))
def test_any_json_record_reads_as_a_bounded_record_or_one_reason(body: dict[str, Any]) -> None:
    """Whatever a careless or hostile writer puts in the record's fields (huge integers, NaN, wrong types), the
    Queue is read: a record whose every number is finite and in its bounds, or no history and one reason."""
    text = json.dumps(body)  # NaN and Infinity as Python's json writes them
    sink: list[Any] = []
    queue = queue_from_object(queue_obj("q", text), creation=0.0, sink=sink)
    if queue.usage is None:
        assert [r.path for r in sink] == [f"metadata.annotations[{USAGE_ANNOTATION}]"]
    else:
        numbers = [queue.usage.at, queue.usage.half_life, queue.usage.window, queue.usage.share,
                   *queue.usage.used.values()]
        assert sink == [] and all(math.isfinite(n) and n >= 0 for n in numbers)
        assert queue.usage.half_life > 0 and queue.usage.window > 0


def test_parse_usage_refuses_what_is_not_text() -> None:
    with pytest.raises(BadValueError):
        parse_usage({"v": 1})


# ---- the arguments --------------------------------------------------------------------------------------------


def proportion(**arguments: Any) -> dict[str, Any]:
    return {"name": "proportion", "arguments": arguments} if arguments else {"name": "proportion"}


@pytest.mark.parametrize(("key", "value"), [
    ("usage.weight", -1), ("usage.weight", 11), ("usage.weight", "nan"), ("usage.weight", "heavy"),
    ("usage.halfLife", "0s"), ("usage.halfLife", "-1h"), ("usage.halfLife", "9000h"), ("usage.halfLife", "1d"),
    ("usage.window", "soon"), ("usage.window", True), ("usage.window", [1]),
])
def test_a_bad_argument_is_one_clear_error(key: str, value: Any) -> None:
    with pytest.raises(ArgumentError) as error:
        conf_from_tiers(["priority", "gang"], [proportion(**{key: value})])
    assert error.value.key == key
    assert error.value.plugin == "proportion"


def test_the_arguments_take_durations_and_seconds() -> None:
    conf = conf_from_tiers(["gang"], [proportion(**{"usage.weight": "0.5", "usage.halfLife": "90m",
                                                     "usage.window": 86400})])
    args = next(p for tier in conf.tiers for p in tier.plugins if p.name == "proportion").args
    assert isinstance(args, ProportionArgs)
    assert (args.usage.weight, args.usage.half_life, args.usage.window) == (0.5, 5400.0, 86400.0)


# ---- shares and placements --------------------------------------------------------------------------------------

HALF_LIFE, WINDOW = 600.0, 7200.0


def fair_conf(weight: float | None, actions: str = "enqueue, allocate, backfill") -> Any:
    args = {} if weight is None else {"usage.weight": weight, "usage.halfLife": "10m", "usage.window": "2h"}
    return conf_from_tiers(["priority", "gang"], ["predicates", proportion(**args), "nodeorder"], actions=actions)


def history(gpu_seconds: float, at: float = 0.0) -> str:
    return encode(QueueUsage(at, HALF_LIFE, WINDOW, {GPU: gpu_seconds} if gpu_seconds else {}))


def seeded(seed: int, annotate: bool) -> ClusterBuilder:
    rng = random.Random(seed)
    c = cluster().nodes("n", rng.randint(2, 5), gpu=rng.choice([4, 8]))
    queues = [f"q{i}" for i in range(rng.randint(2, 3))]
    for name in queues:
        drawn = rng.uniform(0, 4e5)  # drawn either way, so both workloads are the same
        usage = history(drawn) if annotate else None
        c.sim.add_queue(queue_obj(name, usage, weight=rng.randint(1, 3)))
    for j in range(rng.randint(6, 14)):
        replicas = rng.randint(1, 3)
        c.job(f"j{j}", queue=rng.choice(queues), replicas=replicas, gpu=rng.choice([1, 2, 4]))
    return c


def run(c: ClusterBuilder, conf: Any, cycles: int = 4) -> tuple[list[Any], list[Any]]:
    shares = []
    for _ in range(cycles):
        result = c.cycle(conf)
        shares.append(sorted((q.queue, q.deserved, q.share) for q in result.queues))
    binds = [(r.time, r.task, r.node) for r in c.sim.bind_log]
    return binds, shares


@pytest.mark.parametrize("seed", range(12))
def test_with_the_weight_at_0_or_the_feature_off_shares_and_placements_are_todays(seed: int) -> None:
    today = run(seeded(seed, annotate=False), fair_conf(None))
    assert run(seeded(seed, annotate=False), fair_conf(0)) == today
    assert run(seeded(seed, annotate=True), fair_conf(0)) == today  # a history is there, and not used
    assert run(seeded(seed, annotate=True), fair_conf(None)) == today


@pytest.mark.parametrize("seed", range(8))
def test_a_queue_that_used_more_recently_deserves_less_as_the_rule_says(seed: int) -> None:
    rng = random.Random(1000 + seed)
    nodes, per_node = rng.randint(2, 4), 8
    total = nodes * per_node
    used = {f"q{i}": rng.uniform(0, total * 600) for i in range(3)}  # usage fractions up to ~0.7
    weights = {q: rng.randint(1, 3) for q in used}
    k = rng.choice([0.5, 1.0, 2.0])
    c = cluster().nodes("n", nodes, gpu=per_node, cpu="1000", memory="4000Gi")
    for q in used:
        c.sim.add_queue(queue_obj(q, history(used[q]), weight=weights[q]))
        c.job(f"{q}-big", queue=q, replicas=total, gpu=1)  # each queue asks for the whole cluster's GPUs
    result = c.cycle(fair_conf(k))
    now = 0.0  # the first session runs at the record's own time: nothing decayed yet
    fractions = {q: ref_usage_fraction(used[q] * 2 ** (-now / HALF_LIFE), total, HALF_LIFE, WINDOW) for q in used}
    expected = ref_weights(weights, fractions, k)
    deserved = {q.queue: (q.deserved or Resource()).get(GPU) / 1000 for q in result.queues if q.queue in used}
    scale = sum(expected.values())
    for q in used:
        assert deserved[q] == pytest.approx(total * expected[q] / scale, abs=0.002), (q, deserved, expected)
    most, least = max(used, key=lambda q: used[q] / weights[q]), min(used, key=lambda q: used[q] / weights[q])
    # per unit of weight, the queue that used the most per weight never deserves more (equal when both are at
    # the floor of 1% of their weight's fraction)
    assert deserved[most] / weights[most] <= deserved[least] / weights[least] + 0.002


def test_the_penalty_fades_as_the_usage_decays() -> None:
    c = cluster().nodes("n", 2, gpu=8, cpu="1000", memory="4000Gi")
    c.sim.add_queue(queue_obj("night", history(16 * 3600.0)))  # held the cluster's 16 GPUs for an hour
    c.sim.add_queue(queue_obj("day", None))
    for q in ("night", "day"):
        c.job(f"{q}-big", queue=q, replicas=16, gpu=1, cpu="1")
    conf = fair_conf(1.0, actions="enqueue")  # shares only: nothing placed, nothing held, the history decays
    seen = []
    for at in (0.0, 600.0, 1800.0, 3600.0):
        c.sim.now = at
        result = c.cycle(conf)
        deserved = {q.queue: (q.deserved or Resource()).get(GPU) / 1000 for q in result.queues
                    if q.queue in ("night", "day")}
        u = ref_usage_fraction(16 * 3600.0 * 2 ** (-at / HALF_LIFE), 16, HALF_LIFE, WINDOW)
        expected = ref_weights({"night": 1, "day": 1}, {"night": u}, 1.0)
        assert deserved["night"] == pytest.approx(16 * expected["night"] / sum(expected.values()), abs=0.002)
        seen.append(deserved["night"])
    assert seen == sorted(seen) and seen[0] < 1 and seen[-1] > 7.5  # back towards its half as the usage decays


def test_the_queue_without_recent_usage_is_placed_first() -> None:
    c = cluster().node("n0", gpu=4)
    c.sim.add_queue(queue_obj("a-heavy", history(4 * 3600.0)))  # first by name: today it would go first
    c.sim.add_queue(queue_obj("b-light", None))
    c.job("heavy", queue="a-heavy", gpu=3)
    c.job("light", queue="b-light", gpu=3)
    c.cycles(2, fair_conf(1.0))
    assert [r.job.split("/")[1] for r in c.sim.bind_log] == ["light"]


# ---- the history kept and carried on (simulator) ----------------------------------------------------------


def test_the_simulator_keeps_the_history_and_a_restart_from_its_annotation_carries_it_on() -> None:
    c = cluster().node("n0", gpu=8)
    c.sim.add_queue(queue_obj("team", None))
    c.job("train", queue="team", replicas=2, gpu=2)  # holds 4 GPUs from the first cycle on
    conf = fair_conf(1.0)
    c.cycles(102, conf)  # placed in the first; the record starts at the second session (t=1), folds to t=101
    kept = c.sim.queues["team"].usage
    assert kept is not None and kept.at == 101.0
    assert kept.used[GPU] == pytest.approx(ref_decayed_holding(4.0, 100.0, HALF_LIFE), rel=1e-6)
    # A restart: a new cluster (a new scheduler) built from the Queue object carrying the annotation written.
    restarted = cluster().node("n0", gpu=8)
    restarted.sim.add_queue(queue_obj("team", encode(kept)))
    restarted.job("train", queue="team", replicas=2, gpu=2)
    restarted.sim.now = 101.0
    restarted.cycles(2, conf)  # placed at 101, counted from the record at 102
    carried = restarted.sim.queues["team"].usage
    assert carried is not None and carried.at == 102.0
    expected = kept.used[GPU] * 2 ** (-1.0 / HALF_LIFE) + ref_decayed_holding(4.0, 1.0, HALF_LIFE)
    assert carried.used[GPU] == pytest.approx(expected, rel=1e-5)


# ---- the writer's cadence and the CLI ---------------------------------------------------------------------------


def test_the_writer_rewrites_a_record_that_is_missing_unreadable_stale_or_made_otherwise() -> None:
    usage = QueueUsage(1000.0, HALF_LIFE, WINDOW, {GPU: 1.0})
    assert _usage_due(None, usage, 1000.0)
    assert _usage_due("{", usage, 1000.0)
    assert not _usage_due(encode(usage), usage, 1000.0 + USAGE_WRITE_PERIOD - 1)
    assert _usage_due(encode(usage), usage, 1000.0 + USAGE_WRITE_PERIOD)
    assert _usage_due(encode(QueueUsage(1000.0, 60.0, WINDOW)), usage, 1001.0)


def test_queue_list_shows_the_decayed_usage_and_its_share() -> None:
    record = QueueUsage(0.0, 3600.0, 86400.0, {GPU: 8 * 3600.0}, 0.4)
    rows = usage_rows([queue_obj("team", encode(record)), queue_obj("quiet"), queue_obj("bad", "[")], 3600.0)
    assert rows[0][:3] == ("team", "0.200", f"{GPU}=4")  # 8 GPU-hours and a 0.4 share, one half-life later
    assert rows[1][0] == "bad" and "unreadable (is not JSON)" in rows[1][2]
    assert len(rows) == 2
    assert math.isclose(float(rows[0][1]), 0.4 / 2)
