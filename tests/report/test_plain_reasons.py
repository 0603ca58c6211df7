"""The report says why a job waited in plain words, and cuts its wait where the reason changed (issue 38)."""

from __future__ import annotations

from scheduler.api import reasons as R
from scheduler.api.decision import Code, Status
from scheduler.api.messages import render
from scheduler.report.plain import NOTHING_SAID, QUICK, periods, plain, plain_status
from scheduler.sim.report import JobRow

GPU = "nvidia.com/gpu"


def _row(**kw: object) -> JobRow:
    base: dict[str, object] = {"name": "j", "namespace": "default", "kind": "Job", "queue": "q", "arrival": 10.0,
                               "started": None, "ended": None, "pods": 8, "phase": "Pending", "decision": None}
    base.update(kw)
    return JobRow(**base)  # type: ignore[arg-type]


def _status(*reasons: R.Reason) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, "gang")


def test_a_full_queue_is_said_plainly_with_its_numbers() -> None:
    limit = R.QueueLimit("team", R.REAL_CAPABILITY, GPU, limit_amount=12_000, total=16_000, requested=8_000,
                         admitted=8_000, cluster=12_000)  # GPUs counted in thousandths
    text = plain(limit)
    assert text.startswith("Queue team was full: it may hold 12 GPUs")
    assert "16 GPUs" in text and "(4 GPUs too many)" in text
    assert "real capability" not in text  # the internals stay in the scheduler's own sentence


def test_a_gang_says_how_far_it_got_and_a_lone_pod_says_it_found_no_room() -> None:
    assert plain(R.GangNotReady(2, 8, 6, 8)).startswith("Its gang was incomplete: 6 of the 8 pods it needs")
    assert plain(R.GangNotReady(1, 1, 0, 1)) == "Its pod found no room."


def test_a_reservation_says_when_its_nodes_keep_their_free_room_for_it() -> None:
    plain_reservation = plain(R.Reserving(400.0, 2, 0, 2))
    assert plain_reservation.endswith("(0 of 2 pods held).") and "free room" not in plain_reservation
    held = plain(R.Reserving(400.0, 2, 0, 2, 2))
    assert held.endswith("(0 of 2 pods held; 2 of the nodes kept their free room for it, so they could empty).")


def test_a_kind_without_a_plain_sentence_still_says_what_the_scheduler_said() -> None:
    reason = R.PlacementStale("default/p-0", "node-1")
    assert plain(reason) == render(reason)


def test_several_reasons_read_as_sentences_and_a_repeat_is_said_once() -> None:
    text = plain_status(_status(R.GangNotReady(8, 8, 0, 8), R.RoleNotReady("worker", 0, 8),
                                R.GangNotReady(8, 8, 0, 8)))
    assert text == ("None of its 8 pods could be placed (8 needed together). "
                    "Its task worker had 0 of the 8 pods it needs ready.")


def test_the_wait_is_cut_where_the_reason_changed() -> None:
    full = _status(R.QueueOverused("q"))
    short = _status(R.ResourceShortfall(GPU, needed=8, free=2))
    row = _row(started=200.0, said=((11.0, full), (100.0, short)))
    got = [(p.start, p.end, p.kinds) for p in periods(row, end=500.0)]
    # The first word came one second after arrival (the first cycles): the stretch starts at arrival.
    assert got == [(10.0, 100.0, "QueueOverused"), (100.0, 200.0, "ResourceShortfall")]


def test_a_long_silence_before_the_first_reason_is_a_stretch_of_its_own() -> None:
    row = _row(started=200.0, said=((60.0, _status(R.QueueOverused("q"))),))
    got = periods(row, end=500.0)
    assert [(p.start, p.end) for p in got] == [(10.0, 60.0), (60.0, 200.0)]
    assert got[0].why == NOTHING_SAID


def test_a_job_that_never_started_waits_to_no_end_and_one_that_started_at_once_had_no_hold_up() -> None:
    never = periods(_row(said=((10.0, _status(R.QueueOverused("q"))),)), end=500.0)
    assert [(p.start, p.end) for p in never] == [(10.0, None)]
    quick = periods(_row(started=13.0), end=500.0)
    assert [(p.start, p.end, p.why) for p in quick] == [(10.0, 13.0, QUICK)]


def test_room_made_by_evictions_is_a_stretch_with_its_action() -> None:
    row = _row(started=90.0, said=((10.0, _status(R.QueueOverused("q"))),), room=(30.0, "reclaim", 8))
    got = periods(row, end=500.0)
    assert [(p.start, p.end, p.kinds) for p in got] == [(10.0, 30.0, "QueueOverused"), (30.0, 90.0, "RoomMade")]
    assert got[1].why.startswith("reclaim evicted 8 pods of other jobs to make room for it")
