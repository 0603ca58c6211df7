"""API-level fuzz (issue 31): hostile Pods, PodGroups, Volcano Jobs and Queues on a real control plane.

One control plane, one `volcano-py scheduler` process and one `volcano-py controllers` process for the whole
run. Each hypothesis example creates, in a fresh namespace, 2 to 6 hostile objects (hostile_objects.py: a valid
base with 1 to 5 fields changed at once), sent as raw JSON so that NaN, Infinity and 1e999 reach the apiserver
as written; then, in another fresh namespace, a normal gang (a PodGroup and 2 pods, or a Volcano Job of 2). An
object the apiserver refuses is counted as refused. The invariants, for what got through:

- the normal gang binds within GANG_CYCLES scheduling cycles of its pods existing;
- the scheduler and the controllers stay up, and neither logs a traceback;
- each hostile object is named by at most one log line per 10 cycles (1 + cycles // 10 over the example,
  counting the scheduler's and the controllers' lines that name it, or for a Job one of its pods or its PodGroup);
- each hostile object addressed to volcano-py has a reason: bound, or a PodScheduled condition, a Warning event,
  a PodGroup or Job condition, a Queue state.

It prints how many objects of each kind were created and refused, and how many distinct field paths it covered.
Deterministic: derandomized hypothesis (a fixed seed), no example database, no shrinking unless
VOLCANO_FUZZ_API_SHRINK=1 (each step of a shrink is a round on the control plane). VOLCANO_FUZZ_RANDOM=1 draws
afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import urllib3
from controlplane import GPU_RESOURCE, create_gpu_node, free_port, node_is_ready, wait_for
from hostile_objects import GROUP_NAME, NODE_SET, SCHEDULER, Hostile, batches, build, encode, pod as pod_base
from hypothesis import HealthCheck, Phase, given, settings
from kubernetes.client.exceptions import ApiException
from processes import Process

EXAMPLES = int(os.environ.get("VOLCANO_FUZZ_API_EXAMPLES", "12"))
FUZZ_API = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("VOLCANO_FUZZ_RANDOM") != "1",
    database=None,
    phases=(Phase.explicit, Phase.generate, *((Phase.shrink,) if os.environ.get("VOLCANO_FUZZ_API_SHRINK") else ())),
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
GRACE = 30  # seconds a process has to exit on SIGTERM: a pod's default terminationGracePeriodSeconds
TIMEOUT = 90  # seconds; every wait returns as soon as its condition holds
GANG_CYCLES = 10  # the normal gang binds within this many cycles of its pods existing
REASON_GRACE_CYCLES = 10  # after those, a hostile object's reason may take this many more cycles to appear
OBSERVE_CYCLES = 20  # each example watches this many cycles before judging the log lines and reasons
PERIOD = "200ms"
TAINT = {"key": "volcano-py.test/fuzz-api", "value": "normal", "effect": "NoSchedule"}
PATH = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
    "Job": "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs",
    "Queue": "/apis/scheduling.volcano.sh/v1beta1/queues",
}


# ---- the rig: nodes, the two processes, the cycle counter --------------------------------------------------
@dataclass
class Tally:
    created: Counter = field(default_factory=Counter)
    refused: Counter = field(default_factory=Counter)
    refusals: Counter = field(default_factory=Counter)  # (kind, HTTP status)
    paths_tried: set = field(default_factory=set)
    paths_through: set = field(default_factory=set)
    examples: int = 0
    gang_cycles: list = field(default_factory=list)
    worst_lines: Counter = field(default_factory=Counter)  # kind -> most lines one object of it got
    refusal_messages: dict = field(default_factory=dict)  # (kind, HTTP status) -> the first message
    violations: dict = field(default_factory=dict)  # what failed -> [times, the first objects it failed on]

    def violate(self, what: str, h: Hostile | None, detail: str) -> None:
        """An invariant that did not hold: counted, and the first 5 objects (reproducers) kept."""
        entry = self.violations.setdefault(what, [0, []])
        entry[0] += 1
        if len(entry[1]) < 5:
            entry[1].append((f"{h.kind} {h.reproducer()}\n" if h else "") + detail)

    def report(self) -> str:
        return "\n\n".join(f"=== {what} ({times}x); the first:\n" + "\n--\n".join(firsts)
                             for what, (times, firsts) in self.violations.items())

    def summary(self) -> str:
        kinds = ("Pod", "PodGroup", "Job", "Queue")
        rows = [f"  {k:9s} created {self.created[k]:4d}  refused {self.refused[k]:4d}  (most log lines naming "
                f"one: {self.worst_lines[k]})" for k in kinds]
        statuses = ", ".join(f"{k} {s}: {n}" for (k, s), n in sorted(self.refusals.items()))
        return "\n".join([
            f"fuzz-api: {self.examples} examples, normal gang bound after {self.gang_cycles} cycles",
            *rows,
            f"  refusals by status: {statuses or 'none'}",
            *(f"    first {k} {st}: {m}" for (k, st), m in sorted(self.refusal_messages.items())),
            f"  distinct field paths: {len(self.paths_tried)} tried, {len(self.paths_through)} in objects that "
            "got through",
            f"  invariants broken: {sum(t for t, _ in self.violations.values())} "
            f"({', '.join(self.violations) or 'none'})",
        ])


class Rig:
    def __init__(self, control_plane, api_client, core_v1, custom, log_dir):
        self.cp, self.api, self.core, self.custom = control_plane, api_client, core_v1, custom
        self.tag = uuid.uuid4().hex[:6]
        self.hostile_set, self.normal_set = f"h-{self.tag}", f"n-{self.tag}"
        self.hostile_nodes = [f"fz-{self.hostile_set}-{i}" for i in range(2)]
        self.normal_nodes = [f"fz-{self.normal_set}-{i}" for i in range(2)]
        for name in self.hostile_nodes:
            create_gpu_node(core_v1, name, labels={NODE_SET: self.hostile_set})
        for name in self.normal_nodes:  # tainted: only the normal gang tolerates them
            create_gpu_node(core_v1, name, labels={NODE_SET: self.normal_set}, taints=[TAINT])
        for name in self.hostile_nodes + self.normal_nodes:
            wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
        self.metrics_port = free_port()
        self.scheduler = Process(control_plane, log_dir, "scheduler", "scheduler", "--schedule-period", PERIOD,
                                 "--listen-address", f"127.0.0.1:{self.metrics_port}", "--no-leader-elect")
        self.controllers = Process(control_plane, log_dir, "controllers", "controllers", "--no-leader-elect")
        self.http = urllib3.PoolManager()
        self.tally = Tally()
        self.queues: list[str] = []
        self.uids: dict[str, str] = {}  # uid -> what the fuzz created under it, to read the processes' logs
        self.sent: dict[str, str] = {}  # "Kind namespace/name" -> the hostile object as sent (a reproducer)
        wait_for(lambda: self.cycles() > 0, TIMEOUT, what="the scheduler's first cycle")
        wait_for(self._default_queue_open, TIMEOUT, what="the controllers up (the default queue Open)")

    def _default_queue_open(self) -> bool:
        assert self.scheduler.alive() and self.controllers.alive(), self.logs_tail()
        try:
            q = self.custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "default")
        except ApiException:  # not created yet
            return False
        return (q.get("status") or {}).get("state") == "Open"

    def cycles(self) -> int:
        """Scheduling cycles so far: the count of the end-to-end latency histogram, one sample a cycle."""
        assert self.scheduler.alive(), self.scheduler.log()[-3000:]
        try:
            text = self.http.request("GET", f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5,
                                     retries=False).data.decode()
        except urllib3.exceptions.HTTPError:
            return 0
        m = re.search(r"^volcano_e2e_scheduling_latency_milliseconds_count(?:\{\})? (\S+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    def wait_cycles(self, since: int, count: int) -> int:
        return wait_for(lambda: (c := self.cycles()) - since >= count and c, TIMEOUT,
                        what=f"{count} cycles after cycle {since}")

    def pods_on_normal_nodes(self) -> int:
        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        return sum(p["spec"].get("nodeName") in self.normal_nodes for p in pods)

    def logs_tail(self) -> str:
        return (f"--- scheduler ---\n{self.scheduler.log()[-3000:]}\n"
                f"--- controllers ---\n{self.controllers.log()[-3000:]}")

    def raw_create(self, kind: str, namespace: str, body: bytes) -> tuple[int, str]:
        """POST the body as is (it may not be valid JSON); the status and the answer's message."""
        path = PATH[kind].format(ns=namespace)
        _, url, headers, _, _ = self.api.param_serialize(
            "POST", path, header_params={"Content-Type": "application/json", "Accept": "application/json"},
            auth_settings=["BearerToken"])
        resp = self.api.rest_client.pool_manager.request(
            "POST", url, body=body, headers=headers, timeout=urllib3.Timeout(connect=10, read=60))
        try:
            answer = json.loads(resp.data)
            message = str(answer.get("message", ""))
            uid = (answer.get("metadata") or {}).get("uid")
            if resp.status < 300 and uid:
                self.uids[uid] = f"{answer.get('kind')} {namespace}/{answer['metadata'].get('name')}"
        except (ValueError, AttributeError):
            message = resp.data[:300].decode(errors="replace")
        return resp.status, message

    def stop_processes(self) -> None:
        """SIGTERM both: each must exit 0 within Kubernetes' default grace period, whatever it was handed."""
        for group, version, plural in (("scheduling.volcano.sh", "v1beta1", "podgroups"),
                                       ("batch.volcano.sh", "v1alpha1", "jobs")):
            try:  # the uids of what the controllers made (a Job's PodGroup), to read their log by
                for obj in self.custom.list_cluster_custom_object(group, version, plural)["items"]:
                    m = obj["metadata"]
                    self.uids.setdefault(m["uid"], f"{obj['kind']} {m.get('namespace')}/{m['name']}")
            except (ApiException, KeyError, TypeError):  # only to name things in a report
                continue
        for proc in (self.controllers, self.scheduler):
            if proc.proc.returncode is None:
                proc.proc.send_signal(signal.SIGTERM)
                try:
                    proc.proc.wait(GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()  # as the kubelet does after the grace period: no second SIGTERM
                code = proc.stop()
                if code != 0:
                    text = proc.log()
                    named = {uid: f"{what} {self.sent.get(what, '')}" for uid, what in self.uids.items() if uid in text}
                    self.tally.violate(f"the {proc.name} exited {code} on SIGTERM", None,
                                       f"{text[-3000:]}\nuids in the log: {named}")

    def close(self) -> None:
        self.stop_processes()
        for name in self.queues:
            with contextlib.suppress(ApiException):  # already gone
                self.custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
        for name in self.hostile_nodes + self.normal_nodes:
            self.core.delete_node(name)


@pytest.fixture(scope="module")
def rig(control_plane, api_client, core_v1, custom, tmp_path_factory):
    # Not under pytest's temporary root, which keeps only the last 3 sessions: the logs are the evidence.
    log_dir = Path(tempfile.mkdtemp(prefix="volcano-py-fuzz-api-"))
    print(f"fuzz-api: the scheduler's and controllers' logs are in {log_dir}")
    rig = Rig(control_plane, api_client, core_v1, custom, log_dir)
    try:
        yield rig
    finally:
        rig.close()


# ---- the normal gang --------------------------------------------------------------------------------------
def normal_template(normal_set: str) -> dict:
    return {"nodeSelector": {NODE_SET: normal_set}, "tolerations": [{**TAINT, "operator": "Equal"}],
            "terminationGracePeriodSeconds": 0, "schedulerName": SCHEDULER,
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU_RESOURCE: "1"}}}]}


def create_normal_gang(rig: Rig, ns: str, as_job: bool) -> None:
    if as_job:
        rig.custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", {
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "normal"},
            "spec": {"schedulerName": SCHEDULER, "minAvailable": 2, "queue": "default", "tasks": [
                {"name": "worker", "replicas": 2, "template": {"spec": normal_template(rig.normal_set)}}]}})
        return
    rig.custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "normal"},
        "spec": {"minMember": 2, "queue": "default"}})
    for i in range(2):
        rig.core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"normal-{i}", "annotations": {"scheduling.k8s.io/group-name": "normal"}},
            "spec": normal_template(rig.normal_set)})


def pods_of(rig: Rig, ns: str) -> list[dict]:
    return json.loads(rig.core.list_namespaced_pod(ns, _preload_content=False).data)["items"]


# ---- what a hostile object got ------------------------------------------------------------------------------
def stored(rig: Rig, h: Hostile, ns: str) -> dict | None:
    try:
        if h.kind == "Pod":
            return json.loads(rig.core.read_namespaced_pod(h.name, ns, _preload_content=False).data)
        if h.kind == "Queue":
            return rig.custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", h.name)
        group, version, plural = {"PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
                                  "Job": ("batch.volcano.sh", "v1alpha1", "jobs")}[h.kind]
        return rig.custom.get_namespaced_custom_object(group, version, ns, plural, h.name)
    except ApiException:  # gone (a Job's TTL, a deleted queue): nothing left to explain
        return None


def addressed_to_us(h: Hostile, obj: dict) -> bool:
    """Pods and Jobs that name another scheduler are not volcano-py's to explain."""
    if h.kind in ("Pod", "Job"):
        return (obj.get("spec") or {}).get("schedulerName") == SCHEDULER
    return True


def events_for(rig: Rig, h: Hostile, ns: str, kind: str | None = None) -> list[str]:
    """`type reason: message` of the events on the object (for a Job, on its pods and PodGroup too)."""
    where = "default" if h.kind == "Queue" else ns
    events = json.loads(rig.core.list_namespaced_event(where, _preload_content=False).data)["items"]
    return [f"{e.get('type')} {e.get('reason')}: {e.get('message')}" for e in events
            if (kind is None or e.get("type") == kind) and names(h, (e.get("involvedObject") or {}).get("name") or "")]


def warnings_for(rig: Rig, h: Hostile, ns: str) -> list[str]:
    return events_for(rig, h, ns, "Warning")


def names(h: Hostile, name: str) -> bool:
    """The object itself, or for a Job one of its pods or its PodGroup (named `<job>-...`)."""
    return name == h.name or (h.kind == "Job" and name.startswith(f"{h.name}-"))


def reason_of(rig: Rig, h: Hostile, ns: str, obj: dict) -> str | None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if h.kind == "Pod":
        if spec.get("nodeName"):
            return f"bound to {spec['nodeName']}"
        scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled" and c.get("reason")]
        if scheduled:
            return f"PodScheduled {scheduled[0].get('reason')}: {scheduled[0].get('message')}"
    if h.kind in ("PodGroup", "Job") and status.get("conditions"):
        c = status["conditions"][-1]
        return f"condition {c.get('type')} {c.get('reason')}: {c.get('message')}"
    if h.kind == "PodGroup" and status.get("phase") == "Running":
        return "Running: its gang was bound"
    if h.kind == "Queue" and status.get("state"):
        return f"state {status['state']}"
    warnings = warnings_for(rig, h, ns)
    return f"Warning {warnings[0]}" if warnings else None


def lines_naming(h: Hostile, ns: str, text: str) -> list[str]:
    if h.kind == "Queue":
        pattern = re.compile(rf"(?<![\w.-]){re.escape(h.name)}(?![\w.-])")
    else:
        tail = r"(?:-[\w.-]*)?" if h.kind == "Job" else ""
        pattern = re.compile(
            rf"(?:{re.escape(ns)}/{re.escape(h.name)}{tail}(?![\w.-]))"
            rf"|(?:(?<![\w.-]){re.escape(h.name)}{tail}(?![\w.-]).*(?<![\w.-]){re.escape(ns)}(?![\w.-]))"
        )
    return [line for line in text.splitlines() if pattern.search(line)]


# ---- one example ---------------------------------------------------------------------------------------------
def create_batch(rig: Rig, batch: list[tuple[str, list]], hostile_ns: str, index: int) -> list[Hostile]:
    """Create the batch's hostile objects; those the apiserver took, in order (a refusal is tallied)."""
    tally = rig.tally
    through: list[Hostile] = []
    per_kind: Counter = Counter()
    for kind, mutations in batch:
        name = (f"fzq-{rig.tag}-{index}-{per_kind[kind]}" if kind == "Queue"
                else f"h-{kind.lower()}-{per_kind[kind]}")
        per_kind[kind] += 1
        h = build(kind, name, rig.hostile_set, mutations)
        tally.paths_tried |= {(kind, p) for p in h.paths()}
        status, message = rig.raw_create(kind, hostile_ns, encode(h.body))
        if status >= 300:
            tally.refused[kind] += 1
            tally.refusals[(kind, status)] += 1
            tally.refusal_messages.setdefault((kind, status), message[:200])
            if status not in (400, 403, 413, 422):  # a refusal says why; a 500 is the apiserver's own failure
                tally.violate(f"{kind} create answered {status}", h, message)
            continue
        tally.created[kind] += 1
        rig.sent[f"{kind} {hostile_ns}/{name}"] = h.reproducer()
        tally.paths_through |= {(kind, p) for p in h.paths()}
        if kind == "Queue":
            rig.queues.append(name)
        if kind == "PodGroup":  # a member, valid, so that the scheduler reads the PodGroup's fields in a gang
            member = pod_base(f"{name}-member", rig.hostile_set)
            member["metadata"]["annotations"][GROUP_NAME] = name
            rig.core.create_namespaced_pod(hostile_ns, member)
        through.append(h)
    return through


def run_example(rig: Rig, batch: list[tuple[str, list]]) -> None:
    """Create the batch and the normal gang, then record each invariant that did not hold (rig.tally.violations):
    every example runs, so one run lists every distinct failure, each with its object."""
    tally = rig.tally
    index = tally.examples
    tally.examples += 1
    # Room for this example's gang: earlier gangs go with their namespaces, in the background.
    wait_for(lambda: rig.pods_on_normal_nodes() <= 2 * 8 - 2, TIMEOUT, what="2 GPUs free on the normal nodes")
    hostile_ns, normal_ns = f"fz-h-{rig.tag}-{index}", f"fz-n-{rig.tag}-{index}"
    for ns in (hostile_ns, normal_ns):
        rig.core.create_namespace({"metadata": {"name": ns, "labels": {"volcano-py.test/fuzz-api": "true"}}})
    offsets = (len(rig.scheduler.log()), len(rig.controllers.log()))
    first_cycle = rig.cycles()
    try:
        through = create_batch(rig, batch, hostile_ns, index)
        context = "; ".join(h.reproducer() for h in through)

        as_job = index % 2 == 1
        create_normal_gang(rig, normal_ns, as_job)
        try:
            wait_for(lambda: len(pods_of(rig, normal_ns)) == 2, TIMEOUT, what="the normal gang's 2 pods exist")
        except AssertionError:
            tally.violate("the normal gang's pods were never created", None, f"{context}\n{rig.logs_tail()}")
            return
        pods_at = rig.cycles()
        try:
            wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_of(rig, normal_ns)), TIMEOUT,
                     interval=0.05, what="the normal gang bound")
            took = rig.cycles() - pods_at
            tally.gang_cycles.append(took)
            if took > GANG_CYCLES:
                tally.violate(f"the normal gang took more than {GANG_CYCLES} cycles", None, f"{took} cycles; {context}")
        except AssertionError:
            tally.violate("the normal gang never bound", None, f"{context}\n{rig.logs_tail()}")

        # Watch OBSERVE_CYCLES cycles, then each hostile object addressed to volcano-py must have its reason.
        try:
            rig.wait_cycles(first_cycle, OBSERVE_CYCLES)
        except AssertionError:
            tally.violate(f"the scheduler ran fewer than {OBSERVE_CYCLES} cycles in {TIMEOUT} s", None,
                          f"{context}\n{rig.logs_tail()}")
            return
        judged = [h for h in through if (obj := stored(rig, h, hostile_ns)) and addressed_to_us(h, obj)]
        missing: list[Hostile] = []

        def all_explained() -> bool:
            missing[:] = [h for h in judged if (obj := stored(rig, h, hostile_ns)) is not None
                          and reason_of(rig, h, hostile_ns, obj) is None]
            return not missing

        grace = rig.cycles() + REASON_GRACE_CYCLES
        wait_for(lambda: all_explained() or rig.cycles() >= grace, TIMEOUT, interval=0.3,
                 what="a reason on every hostile object")
        for h in missing if not all_explained() else []:
            obj = stored(rig, h, hostile_ns) or {}
            group = ((obj.get("metadata") or {}).get("annotations") or {}).get(GROUP_NAME)
            if h.kind == "Pod" and group is not None:
                exists = group in {x.name for x in through if x.kind == "PodGroup"}
                tally.violate(f"Pod without a reason (its PodGroup {'exists' if exists else 'does not exist'})", h,
                              f"status as stored: {json.dumps(obj.get('status'))[:600]}; "
                              f"events: {events_for(rig, h, hostile_ns)}")
                continue
            tally.violate(f"{h.kind} without a reason", h, f"no condition, no Warning event, not bound; status as "
                          f"stored: {json.dumps(obj.get('status'))[:600]}; events: {events_for(rig, h, hostile_ns)}")

        cycles = rig.cycles() - first_cycle
        for proc in (rig.scheduler, rig.controllers):
            if not proc.alive():
                tally.violate(f"the {proc.name} exited", None, f"{context}\n{proc.log()[-4000:]}")
        sched_text = rig.scheduler.log()[offsets[0]:]
        ctl_text = rig.controllers.log()[offsets[1]:]
        for proc_name, text in (("scheduler", sched_text), ("controllers", ctl_text)):
            if "Traceback (most recent call last)" in text:
                at = text.index("Traceback (most recent call last)")
                tally.violate(f"the {proc_name} logged a traceback", None,
                              f"{context}\n{text[max(0, at - 300):][:3000]}")
        allowed = 1 + cycles // 10
        for h in through:
            lines = lines_naming(h, hostile_ns, sched_text) + lines_naming(h, hostile_ns, ctl_text)
            tally.worst_lines[h.kind] = max(tally.worst_lines[h.kind], len(lines))
            if len(lines) > allowed:
                tally.violate(f"{h.kind} named by more than one log line per 10 cycles", h,
                              f"{len(lines)} lines in {cycles} cycles (at most {allowed}):\n" + "\n".join(lines[:8]))
    finally:
        for ns in (hostile_ns, normal_ns):
            rig.core.delete_namespace(ns)


def test_hostile_objects_cost_their_namespace_alone(rig):
    """The normal gang binds, both processes stay up, each hostile object gets a reason and few log lines."""

    @FUZZ_API
    @given(batch=batches())
    def example(batch):
        run_example(rig, batch)

    try:
        example()
        rig.stop_processes()
    finally:
        print("\n" + rig.tally.summary())
        print(rig.tally.report())
    tally = rig.tally
    assert tally.examples >= EXAMPLES
    # Not vacuous: objects of every kind got through.
    assert all(tally.created[k] for k in ("Pod", "PodGroup", "Job", "Queue")), tally.summary()
    assert not tally.violations, tally.report()
