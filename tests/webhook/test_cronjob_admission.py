"""volcano-py's /cronjobs/validate refuses what Volcano's does (pkg/webhooks/admission/cronjobs/validate/
admit_cronjob.go): an empty or TZ-bearing or unparsable schedule, an empty, malformed, Local or unknown time
zone, a name too long for its Jobs' suffix or not a qualified name. Each refusal names its field."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.webhook.cronjobs import MAX_NAME, admit_cronjob
from scheduler.webhook.server import handlers


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {}}, **spec}}


CASES = [
    ("Volcano's example is admitted", cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=60), []),
    ("a named IANA zone is admitted", cronjob(timeZone="Asia/Shanghai"), []),
    ("a descriptor schedule is admitted", cronjob(schedule="@hourly"), []),
    ("an empty schedule", cronjob(schedule=""), ["spec.schedule"]),
    ("a TZ prefix belongs in timeZone", cronjob(schedule="CRON_TZ=UTC 0 * * * *"), ["spec.schedule"]),
    ("six fields are not a standard expression", cronjob(schedule="0 0 * * * *"), ["spec.schedule"]),
    ("a minute out of range", cronjob(schedule="61 * * * *"), ["spec.schedule"]),
    ("an empty time zone", cronjob(timeZone=""), ["spec.timeZone"]),
    ("Local is not a zone a user may name", cronjob(timeZone="Local"), ["spec.timeZone"]),
    ("a path out of the zone database", cronjob(timeZone="../etc/passwd"), ["spec.timeZone"]),
    ("a zone that does not exist", cronjob(timeZone="Mars/Olympus"), ["spec.timeZone"]),
    ("a name that leaves no room for the suffix", cronjob(name="a" * (MAX_NAME + 1)), ["metadata.name"]),
    ("the longest name that does", cronjob(name="a" * MAX_NAME), []),
    ("a name that is not a qualified name", cronjob(name="-nightly"), ["metadata.name"]),
    ("two problems, each named", cronjob(name="x" * 60, schedule=""), ["spec.schedule", "metadata.name"]),
]


@pytest.mark.parametrize(("obj", "refused_at"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cronjob_admission(obj: dict[str, Any], refused_at: list[str]) -> None:
    for operation in ("CREATE", "UPDATE"):
        decision = admit_cronjob(operation, obj)
        assert decision.allowed is (not refused_at)
        assert [p.split(": ", 1)[0] for p in decision.problems] == refused_at


def test_another_operation_is_refused() -> None:
    assert [p.split(": ", 1)[0] for p in admit_cronjob("DELETE", cronjob()).problems] == ["operation"]


def test_the_review_answers_through_the_servers_handler() -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u-3", "operation": "CREATE", "object": cronjob(schedule="every day")}}
    answer = handlers(None, ["/cronjobs/validate"])["/cronjobs/validate"](review)  # type: ignore[arg-type]
    assert answer["response"]["uid"] == "u-3" and answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
