"""volcano-py's /jobs/validate decides as Volcano's validating webhook does (pkg/webhooks/admission/jobs/validate/
admit_job.go), field by field, and the HTTPS server answers the apiserver's AdmissionReviews."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.webhook.admission import Queues, admit_job, default_patch, review_job, review_job_defaults
from scheduler.webhook.server import VOLCANO_PATHS, WebhookServer, handlers

QUEUES = {
    "open": {"metadata": {"name": "open"}, "status": {"state": "Open"}},
    "fresh": {"metadata": {"name": "fresh"}},  # created a moment ago: no state written yet
    "closed": {"metadata": {"name": "closed"}, "status": {"state": "Closed"}},
    "closing": {"metadata": {"name": "closing"}, "status": {"state": "Closing"}},
    "parent": {"metadata": {"name": "parent"}, "status": {"state": "Open"}},
    "child": {"metadata": {"name": "child"}, "spec": {"parent": "parent"}, "status": {"state": "Open"}},
}


def queues() -> Queues:
    return Queues(QUEUES.get, lambda name: [n for n, q in QUEUES.items() if q.get("spec", {}).get("parent") == name])


def job(queue: str | None = "open", replicas: int = 2, minimum: int | None = None, image: str = "busybox") -> dict:
    spec: dict[str, Any] = {"tasks": [{"name": "w", "replicas": replicas,
                                       "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}]}
    if queue is not None:
        spec["queue"] = queue
    if minimum is not None:
        spec["minAvailable"] = minimum
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec}


def fields(problems: tuple[str, ...]) -> list[str]:
    """The field each problem names (every problem starts with `field: `)."""
    return [p.split(":", 1)[0] for p in problems]


@pytest.mark.parametrize(("queue", "allowed"), [
    ("open", True),
    ("fresh", True),  # deliberate: Volcano refuses a queue whose state is not yet Open
    ("child", True),
    ("missing", False),
    ("closed", False),
    ("closing", False),
    ("parent", False),  # jobs go to leaf queues only
    ("root", False),
])
def test_create_checks_the_jobs_queue(queue: str, allowed: bool) -> None:
    decision = admit_job("CREATE", job(queue), None, queues())
    assert decision.allowed is allowed
    assert fields(decision.problems) == ([] if allowed else ["spec.queue"])


def test_a_job_naming_no_queue_goes_to_default() -> None:
    assert fields(admit_job("CREATE", job(None), None, queues()).problems) == ["spec.queue"]  # no "default" here
    with_default = Queues(lambda n: {"metadata": {"name": n}} if n == "default" else None, lambda _: [])
    assert admit_job("CREATE", job(None), None, with_default).allowed


def test_create_runs_the_jobs_own_rules_too() -> None:
    decision = admit_job("CREATE", job("missing", replicas=2, minimum=3), None, queues())
    assert fields(decision.problems) == ["spec.minAvailable", "spec.queue"]


@pytest.mark.parametrize(("change", "problem_fields"), [
    ("scale replicas and minAvailable", []),
    ("change priorityClassName", []),
    ("fill a generated claim's name", []),
    ("change the image", ["spec.tasks"]),
    ("add a task", ["spec.tasks"]),
    ("minAvailable above the replicas", ["spec.minAvailable"]),
    ("negative replicas", ["spec.tasks[0].replicas", "spec.minAvailable"]),
    ("change the queue", ["spec.queue"]),
])
def test_update_may_change_only_the_numbers(change: str, problem_fields: list[str]) -> None:
    old = job(replicas=2, minimum=2)
    old["spec"]["volumes"] = [{"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]
    new = copy.deepcopy(old)
    spec, task = new["spec"], new["spec"]["tasks"][0]
    match change:
        case "scale replicas and minAvailable":
            task["replicas"], task["minAvailable"], spec["minAvailable"] = 4, 3, 3
        case "change priorityClassName":
            spec["priorityClassName"] = "high"
        case "fill a generated claim's name":
            spec["volumes"][0]["volumeClaimName"] = "j-volume-abc12"
        case "change the image":
            task["template"]["spec"]["containers"][0]["image"] = "alpine"
        case "add a task":
            spec["tasks"].append(copy.deepcopy(task) | {"name": "x"})
        case "minAvailable above the replicas":
            spec["minAvailable"] = 5
        case "negative replicas":
            task["replicas"] = -1
        case "change the queue":
            spec["queue"] = "closed"
    decision = admit_job("UPDATE", new, old, queues())
    assert (decision.allowed, fields(decision.problems)) == (not problem_fields, problem_fields)


def test_the_review_answers_the_requests_uid_and_says_why() -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u-1", "operation": "CREATE", "object": job("missing")}}
    answer = review_job(review, queues())
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
    assert fields((answer["response"]["status"]["message"],)) == ["spec.queue"]


def test_an_unknown_enabled_admission_path_is_a_start_error() -> None:
    with pytest.raises(ValueError, match="/jobs/validat"):
        handlers(queues(), ["/jobs/validat"])
    assert set(handlers(queues(), VOLCANO_PATHS)) == set(VOLCANO_PATHS)


# ---- the HTTPS server ---------------------------------------------------------------------------------------
def _self_signed(directory: Path) -> tuple[Path, Path]:
    crt, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return crt, key


def _post(url: str, body: bytes, crt: Path) -> tuple[int, dict]:
    context = ssl.create_default_context(cafile=str(crt))
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_server_answers_reviews_over_https(tmp_path: Path) -> None:
    crt, key = _self_signed(tmp_path)
    server = WebhookServer("127.0.0.1", 0, str(crt), str(key),
                           handlers(queues(), ["/jobs/validate", "/pods/mutate"])).start()
    base = f"https://127.0.0.1:{server.port}"
    try:
        review = {"request": {"uid": "u-2", "operation": "CREATE", "object": job("closed")}}
        status, answer = _post(f"{base}/jobs/validate", json.dumps(review).encode(), crt)
        assert (status, answer["response"]["uid"], answer["response"]["allowed"]) == (200, "u-2", False)
        status, answer = _post(f"{base}/pods/mutate", json.dumps(review).encode(), crt)
        assert (status, answer["response"]["allowed"]) == (200, True)  # a Volcano path volcano-py lets through
        assert _post(f"{base}/queues/validate", json.dumps(review).encode(), crt)[0] == 404  # not enabled
        assert _post(f"{base}/jobs/validate", b"not json", crt)[0] == 400
    finally:
        server.stop()


# ---- /jobs/mutate: Volcano's defaults as a JSON Patch ----------------------------------------------------
def apply(job: dict, patch: list[dict]) -> dict:
    """The patch's ops, which are all add/replace of /spec or one of its top-level fields."""
    out = copy.deepcopy(job)
    for op in patch:
        assert op["op"] in ("add", "replace")
        parts = op["path"].split("/")[1:]
        if parts == ["spec"]:
            out["spec"] = op["value"]
        else:
            assert parts[0] == "spec" and len(parts) == 2
            out["spec"][parts[1]] = op["value"]
    return out


def test_mutate_writes_volcanos_defaults_as_in_its_job_mutate_check_spec() -> None:
    """test/e2e/jobp/admission.go "Job mutate check": two unnamed tasks, no queue, no scheduler."""
    new = job(None, replicas=1, minimum=1)
    new["spec"]["tasks"].append(copy.deepcopy(new["spec"]["tasks"][0]))
    for task in new["spec"]["tasks"]:
        del task["name"]
    review = {"request": {"uid": "u-3", "operation": "CREATE", "object": new}}
    answer = review_job_defaults(review, "volcano")["response"]
    assert (answer["allowed"], answer["patchType"]) == (True, "JSONPatch")
    spec = apply(new, json.loads(base64.b64decode(answer["patch"])))["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"]) == ("default", "volcano", 3)
    assert spec["minAvailable"] == 1
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [("default0", 1, 3),
                                                                                      ("default1", 1, 3)]


def test_mutate_keeps_what_the_user_wrote_and_sends_no_patch_when_nothing_changes() -> None:
    new = job("open", replicas=2, minimum=1)
    new["spec"] |= {"schedulerName": "volcano-py", "maxRetry": 5}
    new["spec"]["tasks"][0] |= {"minAvailable": 1, "maxRetry": 2}
    assert default_patch(new, "volcano") == []
    review = {"request": {"uid": "u-4", "operation": "CREATE", "object": new}}
    assert "patch" not in review_job_defaults(review, "volcano")["response"]
    del new["spec"]["maxRetry"]
    assert default_patch(new, "volcano") == [{"op": "add", "path": "/spec/maxRetry", "value": 3}]
