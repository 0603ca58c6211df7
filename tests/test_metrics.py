"""scheduler/metrics.py: a cycle turns into Volcano's metric names with the right values; the HTTP endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from scheduler.api.resources import GPU, Resource
from scheduler.api.snapshot import CycleResult, Eviction, GangBind, QueueStatus
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.metrics import PER_JOB_LABELS, MetricsServer, SchedulerMetrics, exposition, parse_address, sample_cycle
from scheduler.testing import cluster


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def run(builder):  # one cycle on the builder's cluster, returning the result and the post-cycle snapshot
    snapshot = builder.sim.snapshot()
    result = run_cycle(snapshot, builtin_default_conf())
    builder.sim.apply(result)
    return result, snapshot


@pytest.fixture
def gpu_cluster():
    """12 GPUs; team-a (weight 2: deserves 8) gets an 8-GPU gang that fits, team-b an 8-GPU gang that cannot."""
    return (
        cluster()
        .node("n1", cpu="64", gpu=8)
        .node("n2", cpu="64", gpu=4)
        .queue("team-a", weight=2, capability={GPU: 16})
        .queue("team-b", weight=1)
        .job("a", queue="team-a", replicas=8, gpu=1, cpu="1", phase="Inqueue")
        .job("b", queue="team-b", replicas=8, gpu=1, cpu="1", phase="Inqueue")
    )


def test_a_gang_that_binds_and_one_that_cannot_fit_are_counted(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    sample = sample_cycle(result, 0.25, snapshot)
    assert sample.attempts == {"scheduled": 1, "unschedulable": 1}
    assert sample.unschedulable_jobs == 1
    assert sample.e2e_ms == 250.0
    queues = {q.queue: q for q in sample.queues}
    assert queues["team-a"].allocated.get(GPU) == 8000
    assert queues["team-b"].allocated.get(GPU) == 0
    assert queues["team-b"].pending.get(GPU) == 8000
    assert queues["team-a"].capability is not None and queues["team-a"].capability.get(GPU) == 16000


def test_registry_has_volcano_names_and_values(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.record(sample_cycle(result, 0.25, snapshot))

    assert value(registry, "volcano_e2e_scheduling_latency_milliseconds_count") == 1
    assert value(registry, "volcano_e2e_scheduling_latency_milliseconds_sum") == 250.0
    for action in builtin_default_conf().actions:
        assert value(registry, "volcano_action_scheduling_latency_milliseconds_count", action=action) == 1
    for on_session in ("OnSessionOpen", "OnSessionClose"):
        labels = {"plugin": "gang", "OnSession": on_session}
        assert value(registry, "volcano_plugin_scheduling_latency_milliseconds_count", **labels) == 1
    assert value(registry, "volcano_open_session_duration_milliseconds_count") == 1
    assert value(registry, "volcano_schedule_attempts_total", result="scheduled") == 1
    assert value(registry, "volcano_schedule_attempts_total", result="unschedulable") == 1
    assert value(registry, "volcano_schedule_attempts_total", result="error") == 0
    assert value(registry, "volcano_unschedule_job_count") == 1
    assert value(registry, "volcano_py_queue_allocated_gpu", queue_name="team-a") == 8
    assert value(registry, "volcano_py_queue_pending_gpu", queue_name="team-b") == 8
    assert value(registry, "volcano_py_queue_pending_gpu", queue_name="team-a") == 0
    assert value(registry, "volcano_queue_allocated_scalar_resources", queue_name="team-a", resource=GPU) == 8000
    assert value(registry, "volcano_queue_allocated_scalar_resources", queue_name="team-b", resource=GPU) == 0
    assert value(registry, "volcano_queue_allocated_milli_cpu", queue_name="team-a") == 8000
    assert value(registry, "volcano_queue_capacity_scalar_resources", queue_name="team-a", resource=GPU) == 16000
    assert value(registry, "volcano_py_job_status_count", status="Inqueue") is not None
    assert value(registry, "volcano_pod_preemption_victims") == 0


def test_a_cycles_cpu_time_is_its_own_histogram_and_absent_when_not_measured(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.record(sample_cycle(result, 0.25, snapshot))
    assert value(registry, "volcano_py_cycle_cpu_milliseconds_count") == 0
    m.record(sample_cycle(result, 0.25, snapshot, cpu_seconds=0.04))
    assert value(registry, "volcano_py_cycle_cpu_milliseconds_count") == 1
    assert value(registry, "volcano_py_cycle_cpu_milliseconds_sum") == pytest.approx(40.0)
    assert value(registry, "volcano_e2e_scheduling_latency_milliseconds_sum") == 500.0  # wall-clock, both cycles


def test_proportion_fills_deserved_share_and_overused(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).record(sample_cycle(result, 0.1, snapshot))
    statuses = {q.queue: q for q in result.queues}
    a = statuses["team-a"]
    assert a.deserved is not None and a.share is not None and a.overused is not None
    assert value(registry, "volcano_queue_deserved_scalar_resources", queue_name="team-a", resource=GPU) == (
        a.deserved.get(GPU)
    )
    assert value(registry, "volcano_queue_share", queue_name="team-a") == pytest.approx(a.share)
    assert value(registry, "volcano_queue_overused", queue_name="team-a") == (1.0 if a.overused else 0.0)


def test_a_gang_started_after_waiting_observes_its_pending_duration():
    c = cluster().node("n1", gpu=8).job("late", replicas=2, gpu=1, phase="Inqueue")
    snapshot = c.sim.snapshot()
    snapshot.now = 130.0
    snapshot.jobs["default/late"].creation = 10.0  # created 120 s before this cycle
    result = run_cycle(snapshot, builtin_default_conf())
    sample = sample_cycle(result, 0.01, snapshot)
    assert sample.pending_durations == (120.0,)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).record(sample)
    assert value(registry, "volcano_py_podgroup_pending_duration_seconds_count") == 1
    assert value(registry, "volcano_py_podgroup_pending_duration_seconds_bucket", le="120.0") == 1
    assert value(registry, "volcano_py_podgroup_pending_duration_seconds_bucket", le="60.0") == 0


def test_evictions_set_the_victims_gauge_and_errors_count():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    result = CycleResult(
        binds=[GangBind("ns/a", (("ns/a-0", "n1"),))],
        evictions=[Eviction("ns/low", "ns/low-0", "n1", "preempted"), Eviction("ns/low", "ns/low-1", "n1", "x")],
        queues=[QueueStatus("q", Resource.of(cpu=500, scalars={GPU: 1500}))],
        timings={"action:allocate": 0.002, "plugin:gang:OnSessionOpen": 0.001},
        counters={"eviction_transactions:Preempted": 1, "eviction_transactions:Other": 3},
    )
    m.record(sample_cycle(result, 0.005))  # without a snapshot: binds still count as scheduled gangs
    m.record_error()
    assert value(registry, "volcano_pod_preemption_victims") == 2
    assert value(registry, "volcano_total_preemption_attempts") == 1  # Volcano's name: no _total
    assert value(registry, "volcano_eviction_transactions_total", action="preempt") == 1
    assert value(registry, "volcano_eviction_transactions_total", action="Other") is None
    assert value(registry, "volcano_plugin_scheduling_latency_milliseconds_count", plugin="gang",
                 OnSession="OnSessionOpen") == 1
    assert value(registry, "volcano_schedule_attempts_total", result="scheduled") == 1
    assert value(registry, "volcano_schedule_attempts_total", result="error") == 1
    assert value(registry, "volcano_action_scheduling_latency_milliseconds_sum", action="allocate") == 2.0
    assert value(registry, "volcano_py_queue_allocated_gpu", queue_name="q") == 1.5
    assert value(registry, "volcano_queue_allocated_milli_cpu", queue_name="q") == 500


def test_a_deleted_queue_and_a_released_resource_lose_their_series():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    foo = "example.com/foo"
    m.record(sample_cycle(CycleResult(queues=[QueueStatus("gone", Resource.of(scalars={foo: 2000}))]), 0.0))
    assert value(registry, "volcano_queue_allocated_scalar_resources", queue_name="gone", resource=foo) == 2000
    m.record(sample_cycle(CycleResult(queues=[QueueStatus("kept", Resource())]), 0.0))
    assert value(registry, "volcano_queue_allocated_scalar_resources", queue_name="gone", resource=foo) is None
    assert value(registry, "volcano_py_queue_allocated_gpu", queue_name="gone") is None
    assert value(registry, "volcano_py_queue_allocated_gpu", queue_name="kept") == 0


def test_labels_never_name_a_pod_and_name_a_job_only_in_volcanos_per_job_families(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).record(sample_cycle(result, 0.1, snapshot))
    allowed = {"queue_name", "action", "plugin", "OnSession", "resource", "result", "status", "stage", "le"}
    per_job = {
        "volcano_e2e_job_scheduling_duration", "volcano_e2e_job_scheduling_start_time",
        "volcano_e2e_job_scheduling_last_time", "volcano_unschedule_task_count", "volcano_job_share",
        "volcano_job_retry_counts",
    }
    for family in registry.collect():
        for s in family.samples:
            extra = set(s.labels) - allowed
            assert not extra or (family.name in per_job and extra <= PER_JOB_LABELS), (s.name, s.labels)


def test_a_deleted_job_loses_its_per_job_series(gpu_cluster):
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    result, snapshot = run(gpu_cluster)
    m.record(sample_cycle(result, 0.1, snapshot))
    assert value(registry, "volcano_unschedule_task_count", job_id="b") == 8
    assert value(registry, "volcano_job_retry_counts", job_id="b") == 1
    assert value(registry, "volcano_unschedule_task_count", job_id="a") == 0
    assert value(registry, "volcano_job_share", job_ns="default", job_id="a") == pytest.approx(8 / 12)
    labels = {"job_name": "a", "queue": "team-a", "job_namespace": "default"}
    assert value(registry, "volcano_e2e_job_scheduling_duration", **labels) is not None
    del snapshot.jobs["default/a"]
    m.record(sample_cycle(CycleResult(queues=result.queues), 0.1, snapshot))
    assert value(registry, "volcano_e2e_job_scheduling_duration", **labels) is None
    assert value(registry, "volcano_unschedule_task_count", job_id="a") is None
    assert value(registry, "volcano_job_share", job_ns="default", job_id="a") is None
    assert value(registry, "volcano_job_retry_counts", job_id="b") == 2


def test_request_inqueue_and_real_capacity_per_queue(gpu_cluster):
    result, snapshot = run(gpu_cluster)
    registry = CollectorRegistry()
    SchedulerMetrics(registry).record(sample_cycle(result, 0.1, snapshot))
    request = "volcano_queue_request_scalar_resources"
    assert value(registry, request, queue_name="team-a", resource=GPU) == 8000  # all bound
    assert value(registry, request, queue_name="team-b", resource=GPU) == 8000  # all pending
    assert value(registry, "volcano_queue_request_milli_cpu", queue_name="team-b") == 8000
    real = "volcano_queue_real_capacity_scalar_resources"
    assert value(registry, real, queue_name="team-a", resource=GPU) == 12000  # capability 16 > the cluster's 12
    assert value(registry, real, queue_name="team-b", resource=GPU) == 12000
    assert value(registry, "volcano_queue_real_capacity_milli_cpu", queue_name="team-b") == 128000
    assert value(registry, "volcano_queue_inqueue_milli_cpu", queue_name="team-a") == 0


def test_the_exposition_writes_volcanos_counters_without_total():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.record(sample_cycle(CycleResult(evictions=[Eviction("ns/low", "ns/low-0", "n1", "x")]), 0.0))
    text = exposition(registry).decode()
    assert "# TYPE volcano_total_preemption_attempts counter\nvolcano_total_preemption_attempts 1.0\n" in text
    assert "volcano_total_preemption_attempts_total" not in text
    assert "# TYPE volcano_job_retry_counts counter\n" in text
    assert "# TYPE volcano_schedule_attempts_total counter\n" in text  # prometheus_client's own, unchanged


def test_a_bind_observes_the_bind_stages_and_the_pods_latency():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.record_bind(0.004, 2.5, prebind_seconds=0.001)
    m.record_bind(0.002, None)
    assert value(registry, "volcano_scheduling_stage_duration_milliseconds_count", stage="Bind") == 2
    assert value(registry, "volcano_scheduling_stage_duration_milliseconds_count", stage="PreBind") == 1
    assert value(registry, "volcano_task_scheduling_latency_milliseconds_sum", stage="Bound") == 2500.0
    assert value(registry, "volcano_task_scheduling_latency_milliseconds_sum", stage="PreBound") == 2496.0


@pytest.mark.parametrize(
    "address, expected",
    [(":8080", ("", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9090", ("::1", 9090))],
    ids=["port only", "host and port", "ipv6"],
)
def test_listen_address_forms(address, expected):
    assert parse_address(address) == expected


def test_listen_address_without_port_is_rejected():
    with pytest.raises(ValueError, match="--listen-address"):
        parse_address("localhost")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_http_server_serves_metrics_healthz_and_readyz():
    registry = CollectorRegistry()
    SchedulerMetrics(registry).record(sample_cycle(CycleResult(), 0.003))
    synced = {"ok": False}
    server = MetricsServer("127.0.0.1:0", registry=registry, ready=lambda: synced["ok"]).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        status, body = _get(f"{base}/metrics")
        assert status == 200 and "volcano_e2e_scheduling_latency_milliseconds_bucket" in body
        assert _get(f"{base}/healthz")[0] == 200
        assert _get(f"{base}/readyz")[0] == 503
        synced["ok"] = True
        assert _get(f"{base}/readyz")[0] == 200
        assert _get(f"{base}/nope")[0] == 404
    finally:
        server.stop()


def test_the_cache_observes_each_bind_it_sends():
    """scheduler/cache/binder.py reports every pod it bound (a fake apiserver accepts all)."""
    from scheduler import metrics
    from scheduler.api.timestamps import rfc3339
    from scheduler.cache.cluster_cache import ClusterCache

    class Accepting:
        request_timeout = 30.0  # as Kube has it (the binder's fence reads it)

        def request(self, method: str, path: str, **_: object) -> dict:
            return {}

    now = 1_800_000_000.0
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: now)
    cache.kube = Accepting()  # type: ignore[assignment]
    cache.pods.objects["ns/p-0"] = {"metadata": {"name": "p-0", "namespace": "ns",
                                                 "creationTimestamp": rfc3339(now - 3.0)}, "spec": {}}
    registry = metrics.default().registry

    def count(name: str, stage: str) -> float:
        return registry.get_sample_value(f"{name}_count", {"stage": stage}) or 0.0

    stage, task = "volcano_scheduling_stage_duration_milliseconds", "volcano_task_scheduling_latency_milliseconds"
    before = [count(stage, "Bind"), count(stage, "PreBind"), count(task, "Bound"), count(task, "PreBound")]
    assert cache.binder.bind("ns/p-0", "n1", now, {"volcano.sh/gpu-index": "0"})
    after = [count(stage, "Bind"), count(stage, "PreBind"), count(task, "Bound"), count(task, "PreBound")]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1]
