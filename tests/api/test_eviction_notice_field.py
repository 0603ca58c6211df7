"""The Queue's eviction notice (issue 32) is parsed once, at the edge, with bounds: a Go duration or seconds in
(0, 1h]; anything else is a typed FieldInvalid and no notice, the Queue read as usual."""

from __future__ import annotations

import pytest

from scheduler.api import fields as F
from scheduler.api.convert import queue_from_object


def _queue(notice: object) -> dict[str, object]:
    return {"metadata": {"name": "q", "annotations": {"volcano-py.io/eviction-notice": notice}},
            "spec": {"weight": 1}}


@pytest.mark.parametrize(("text", "seconds"), [("2m", 120.0), ("90", 90.0), ("1h", 3600.0), ("1.5s", 1.5)])
def test_a_duration_is_read_as_seconds(text: str, seconds: float) -> None:
    sink: list[F.FieldInvalid] = []
    assert queue_from_object(_queue(text), sink=sink).eviction_notice == seconds
    assert sink == []


@pytest.mark.parametrize("bad", ["soon", "0s", "-5s", "2h", "1" * 100])
def test_a_bad_value_gives_no_notice_and_a_typed_reason(bad: object) -> None:
    sink: list[F.FieldInvalid] = []
    queue = queue_from_object(_queue(bad), sink=sink)
    assert queue.eviction_notice == 0.0 and queue.name == "q"
    (reason,) = sink
    assert (reason.object_kind, reason.path, reason.fallback) == (
        "Queue", "metadata.annotations[volcano-py.io/eviction-notice]", "no eviction notice")


def test_no_annotation_no_notice() -> None:
    queue = queue_from_object({"metadata": {"name": "q"}, "spec": {"weight": 1}})
    assert queue.eviction_notice == 0.0


def test_annotations_that_are_not_strings_give_no_notice() -> None:
    sink: list[F.FieldInvalid] = []
    assert queue_from_object(_queue(30), sink=sink).eviction_notice == 0.0
    assert [(r.path, r.fallback) for r in sink] == [("metadata.annotations", "no annotations read")]
