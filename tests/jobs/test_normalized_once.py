"""`normalize_job` of its own answer is that answer, not a new copy (the simulator's job controller syncs every job
every cycle, and each function of jobs/expand.py normalizes what it is given). That is only right because
normalizing is idempotent: normalizing a normalized job again, afresh, changes nothing. Copies of a normalized job
are plain dicts, normalized afresh, so a caller that copies one to change it gets its change defaulted.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings, strategies as st

from scheduler.jobs import normalize_job, podgroup_for
from scheduler.jobs.expand import expected_pod_names, pods_for
from scheduler.jobs.lifecycle import decide
from scheduler.jobs.state import JobEvent, JobStatus

maybe_int = st.one_of(st.none(), st.integers(0, 6))


@st.composite
def tasks(draw: st.DrawFn, index: int) -> dict[str, Any]:
    task: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {
        "limits": {"nvidia.com/gpu": draw(st.integers(0, 2))}}}]}}}
    if draw(st.booleans()):
        task["name"] = f"t{index}"
    for key in ("replicas", "minAvailable", "maxRetry"):
        value = draw(maybe_int)
        if value is not None:
            task[key] = value
    if draw(st.booleans()):
        task["template"]["spec"]["hostNetwork"] = True
    return task


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"tasks": [draw(tasks(i)) for i in range(draw(st.integers(1, 3)))]}
    for key, values in (("queue", st.sampled_from(["", "q1"])), ("schedulerName", st.sampled_from(["", "volcano"])),
                        ("maxRetry", maybe_int), ("minAvailable", maybe_int),
                        ("plugins", st.sampled_from([{}, {"mpi": []}, {"pytorch": ["--master=w"]}, {"svc": []}]))):
        value = draw(values)
        if value is not None and draw(st.booleans()):
            spec[key] = value
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": spec}


@settings(max_examples=200, deadline=None)
@given(jobs())
def test_a_normalized_job_is_normalized_once_and_normalizing_it_afresh_changes_nothing(job: dict[str, Any]) -> None:
    written = copy.deepcopy(job)
    once = normalize_job(job)
    assert job == written  # the input is not changed
    assert normalize_job(once) is once
    copied = copy.deepcopy(once)
    assert type(copied) is dict and type(copy.copy(once)) is dict
    again = normalize_job(copied)
    assert again == once and again is not copied  # afresh: a new object, equal (idempotent)


@settings(max_examples=100, deadline=None)
@given(jobs())
def test_the_functions_that_normalize_answer_alike_for_a_job_and_for_its_normalized_form(job: dict[str, Any]) -> None:
    once = normalize_job(job)
    assert podgroup_for(once) == podgroup_for(job)
    assert pods_for(once) == pods_for(job)
    assert expected_pod_names(once) == expected_pod_names(job)
    assert decide(once, JobStatus(), [], "Inqueue", JobEvent()) == decide(job, JobStatus(), [], "Inqueue", JobEvent())
    assert normalize_job(once) is once  # none of them changed it
    assert once == normalize_job(job)


def test_a_copy_changed_by_its_caller_is_defaulted_again() -> None:
    once = normalize_job({"metadata": {"name": "j"}, "spec": {"tasks": [{"replicas": 2}]}})
    changed = copy.deepcopy(once)
    del changed["spec"]["minAvailable"]
    changed["spec"]["tasks"][0]["replicas"] = 5
    del changed["spec"]["tasks"][0]["minAvailable"]
    assert normalize_job(changed)["spec"]["minAvailable"] == 5
