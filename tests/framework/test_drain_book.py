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


@settings(max_examples=300, deadline=None)
@given(steps)
def test_a_node_is_let_go_exactly_when_it_freed_nothing_for_the_limit(
        plan: list[tuple[float, str, dict[str, int]]]) -> None:
    """The contract, restated as a table kept by hand: a node is held while the gang's least lack on it fell within
    the last limit. The memory of a (gang, node) starts afresh when the gang stops reserving the node, and when a
    sweep (the first call, then one call a limit later each time) finds it not reserved for a limit."""
    book = DrainBook()
    now, swept = 0.0, float("-inf")
    table: dict[tuple[str, str], tuple[int, float, float]] = {}  # (least lacking, since, seen)
    for dt, job, lacking in plan:
        now += dt
        for key in [k for k in table if k[0] == job and k[1] not in lacking]:
            del table[key]  # the gang no longer reserves it
        if now - swept > LIMIT:
            swept = now
            for key in [k for k, (_, _, seen) in table.items() if k[0] != job and now - seen > LIMIT]:
                del table[key]
        book.forget(job, set(lacking), now, LIMIT)
        for node, short in sorted(lacking.items()):
            key = (job, node)
            least, since, _ = table.get(key, (short + 1, now, now))
            if short < least:
                least, since = short, now
            table[key] = (least, since, now)
            assert book.progressing(job, node, short, now, LIMIT) == (now - since <= LIMIT), (key, now, since)


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


def test_a_gang_gone_from_the_cluster_is_dropped_at_the_next_sweep_and_a_live_one_is_kept() -> None:
    book = DrainBook()
    book.forget("a", {"n0"}, 0.0, LIMIT)
    book.progressing("a", "n0", 3, 0.0, LIMIT)
    book.forget("b", {"n1"}, 0.0, LIMIT)
    book.progressing("b", "n1", 3, 0.0, LIMIT)
    book.forget("c", {"n2"}, 10.0, LIMIT, live={"a", "c"})  # within the limit of the last sweep: no sweep
    assert set(book.best) == {"a", "b"}
    book.progressing("a", "n0", 3, 300.0, LIMIT)
    book.progressing("b", "n1", 3, 300.0, LIMIT)  # both seen within the limit: only being gone drops `b`
    book.forget("c", {"n2"}, LIMIT + 1, LIMIT, live={"a", "c"})  # a sweep: `b` is no job of the cluster any more
    assert set(book.best) == {"a"}
