"""The starvation guard's memory of held nodes (`framework/holds.py` DrainBook, `actions/starvation.py` 5.):
a node is held while it frees something more for the gang within the limit, and the book forgets what no
reservation uses any more."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from scheduler.framework.holds import DrainBook

LIMIT = 600.0
JOBS = ("a", "b", "c")
NODES = ("n0", "n1", "n2", "n3")

# One step: seconds since the last step, the gang that reserves, and what each node it reserves lacks.
steps = st.lists(st.tuples(st.floats(0, 2 * LIMIT, allow_nan=False), st.sampled_from(JOBS),
                           st.dictionaries(st.sampled_from(NODES), st.integers(0, 8), min_size=1)),
                 min_size=1, max_size=40)


def play(book: DrainBook, plan: list[tuple[float, str, dict[str, int]]]) -> list[tuple[float, str, str, int, bool]]:
    """Feed the steps as the guard does (forget, then ask for each reserved node); (now, job, node, lacking,
    held) for every answer."""
    now, answers = 0.0, []
    for dt, job, lacking in plan:
        now += dt
        book.forget(job, set(lacking), now, LIMIT)
        for node, short in sorted(lacking.items()):
            answers.append((now, job, node, short, book.progressing(job, node, short, now, LIMIT)))
    return answers


@settings(max_examples=200, deadline=None)
@given(steps)
def test_a_node_that_lacks_less_than_ever_before_is_held(plan: list[tuple[float, str, dict[str, int]]]) -> None:
    least: dict[tuple[str, str], int] = {}
    for _, job, node, short, held in play(DrainBook(), plan):
        if short < least.get((job, node), 9):
            assert held, (job, node, short)
        least[(job, node)] = min(short, least.get((job, node), 9))


@settings(max_examples=200, deadline=None)
@given(steps)
def test_a_node_is_let_go_only_after_the_limit_without_progress(plan: list[tuple[float, str, dict[str, int]]]) -> None:
    """Let go means: the gang reserved the node without a break since it last lacked less, and that was more than
    the limit ago (a break, the node not in the gang's reservation, starts it afresh)."""
    book = DrainBook()
    now = 0.0
    since: dict[tuple[str, str], tuple[int, float]] = {}  # the reservation in force: (least lacking, when)
    seen: dict[tuple[str, str], float] = {}
    let_go: set[tuple[str, str]] = set()
    for dt, job, lacking in plan:
        now += dt
        for key in [k for k in since if k[0] == job and k[1] not in lacking]:
            del since[key]  # the gang no longer reserves it
            let_go.discard(key)
        book.forget(job, set(lacking), now, LIMIT)
        for node, short in sorted(lacking.items()):
            key = (job, node)
            last = since.get(key)
            progress = last is None or short < last[0]
            unbroken = key in seen and now - seen[key] <= LIMIT
            if progress:
                since[key] = last = (short, now)
            held = book.progressing(job, node, short, now, LIMIT)
            seen[key] = now
            if not held:
                assert now - last[1] > LIMIT, (key, now, last)
            if key in let_go and unbroken and not progress:
                assert not held, f"{key} held again at {now} without freeing anything"
            if held:
                let_go.discard(key)
            else:
                let_go.add(key)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_the_book_keeps_only_what_reservations_used_within_two_limits(
        plan: list[tuple[float, str, dict[str, int]]]) -> None:
    book = DrainBook()
    now = 0.0
    used: dict[tuple[str, str], float] = {}
    for dt, job, lacking in plan:
        now += dt
        book.forget(job, set(lacking), now, LIMIT)
        for node, short in lacking.items():
            book.progressing(job, node, short, now, LIMIT)
            used[(job, node)] = now
        for other, nodes in book.best.items():
            for node in nodes:
                key = (other, node)
                assert now - used[key] <= 2 * LIMIT and (other != job or node in lacking), key


def test_a_node_held_with_no_progress_is_let_go_once_and_stays_let_go() -> None:
    book = DrainBook()
    answers = [book.progressing("a", "n0", 3, t, LIMIT) for t in (0.0, 300.0, 600.0, 601.0, 900.0, 1300.0)]
    assert answers == [True, True, True, False, False, False]
    assert book.progressing("a", "n0", 2, 1310.0, LIMIT)  # it freed something: held again


def test_another_gangs_reservations_do_not_make_a_stale_node_held_again() -> None:
    """`a` reserves n0, which frees nothing, while `b` reserves n1 every cycle: long after the limit n0 is still let
    go (each of `b`'s reservations forgets only what no reservation uses)."""
    book = DrainBook()
    held = []
    for t in range(0, 2400, 300):
        now = float(t)
        book.forget("a", {"n0"}, now, LIMIT)
        held.append(book.progressing("a", "n0", 3, now, LIMIT))
        book.forget("b", {"n1"}, now, LIMIT)
        book.progressing("b", "n1", 1, now, LIMIT)
    assert held == [True, True, True, False, False, False, False, False]
