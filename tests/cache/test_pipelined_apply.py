"""The pipelined apply (`--pipeline-apply`, cache/applier.py), without a control plane: the next cycle computes
while the last one's binds are in flight, on a snapshot that accounts them; a failed bind makes its pod pending
again and a later cycle retries it; status writes go in cycle order; never two applies behind the computing
cycle; and, on seeded random runs with binds failing and slow, no pod bound twice and no node over-committed."""

from __future__ import annotations

import copy
import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future

import pytest
from pipeline_doubles import Apiserver, add_gang, cache_with, delete_pod

from scheduler.api.snapshot import CycleResult, Eviction, GangBind
from scheduler.cache.applier import Applied, Applier
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.runner import ConfWatcher, SchedulerLoop

CPU = {"n1": 2, "n2": 2}


def loop_for(cache: ClusterCache) -> SchedulerLoop:
    return SchedulerLoop(cache, ConfWatcher(None), pipeline=True)


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def snapshots_taken(cache: ClusterCache) -> threading.Event:
    """Set once each snapshot of the cache has been taken from here on (clear it to wait for the next)."""
    taken = threading.Event()
    snapshot = cache.snapshot

    def recorded() -> object:
        out = snapshot()
        taken.set()
        return out

    cache.snapshot = recorded  # type: ignore[method-assign]
    return taken


def node_load(api: Apiserver) -> dict[str, int]:
    load: Counter[str] = Counter()
    for _, node in api.landed:
        load[node] += 1  # every pod asks for one CPU
    return dict(load)


def test_the_next_cycle_computes_and_sends_its_binds_while_the_last_ones_are_in_flight() -> None:
    cache, api = cache_with(CPU)
    loop = loop_for(cache)
    try:
        a = add_gang(cache, "a", 2)
        api.hold(*a)
        loop.run_once()  # returns with a's binds still held by the apiserver
        assert api.wait_for_binds(set(a))
        b, c = add_gang(cache, "b", 2), add_gang(cache, "c", 2)  # room for one of them: a's binds hold the rest
        second, errors = in_thread(loop.run_once)
        # a's binds are still held; the second cycle's binds arrive all the same
        assert api.wait_until(lambda sent: set(b) <= sent or set(c) <= sent)
        in_flight = {k for k in api.bind_requests if k in b + c}
        assert in_flight in (set(b), set(c)), "one gang, on the room a's binds left"
        assert not any(k in a for k, _ in api.landed)
        assert second.is_alive(), "its apply is handed over only once the first one is done"
        api.release()
        second.join(10)
        assert not second.is_alive() and errors == []
        cache.drain()
        assert all(load <= CPU[node] for node, load in node_load(api).items())
        assert sorted(k for k, _ in api.landed) == sorted([*a, *in_flight])
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_without_the_pipeline_the_next_cycle_waits_for_the_binds() -> None:
    """The contrast the test above is about: in line, the second cycle sends nothing until the first's binds are
    back."""
    cache, api = cache_with(CPU)
    loop = SchedulerLoop(cache, ConfWatcher(None))
    try:
        a = add_gang(cache, "a", 2)
        api.hold(*a)
        first, _ = in_thread(loop.run_once)
        assert api.wait_for_binds(set(a))
        assert first.is_alive()
        api.release()
        first.join(10)
        assert not first.is_alive()
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_a_failed_bind_makes_its_pod_pending_again_and_a_later_cycle_binds_it() -> None:
    cache, api = cache_with(CPU)
    refused: set[str] = set()

    def refuse_once(key: str) -> bool:
        if key in refused:
            refused.discard(key)
            return True
        return False

    api.refuse = refuse_once
    loop = loop_for(cache)
    try:
        a = add_gang(cache, "a", 2)
        refused.add(a[0])
        api.hold(*a)
        loop.run_once()
        assert api.wait_for_binds(set(a))
        with cache.lock:  # in flight: assumed on its node, so the next snapshot accounts it
            assert set(cache.stores.assumed) == set(a)
        taken = snapshots_taken(cache)
        second, errors = in_thread(loop.run_once)  # computes with a's binds assumed: nothing to do
        assert taken.wait(10)  # its snapshot taken while a's binds are out
        api.release()
        second.join(10)
        assert errors == []
        cache.drain()
        with cache.lock:
            assert a[0] not in cache.stores.assumed and not cache.pods.objects[a[0]]["spec"].get("nodeName")
        assert api.bind_requests.count(a[0]) == 1
        # a's PodGroup: not Running, neither by the cycle whose bind failed nor by the one that counted it bound
        assert "Running" not in [phase for key, phase in api.status_patches if key == "ns/a"]
        loop.run_once()  # the next-but-one cycle retries it
        cache.drain()
        assert api.bind_requests.count(a[0]) == 2
        assert sorted(k for k, _ in api.landed) == sorted(a)
        # ... and Running once they all were
        assert [phase for key, phase in api.status_patches if key == "ns/a"][-1] == "Running"
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_a_gang_whose_binds_all_landed_is_written_running_by_its_own_cycle_after_its_binds() -> None:
    cache, api = cache_with(CPU)
    loop = loop_for(cache)
    try:
        a = add_gang(cache, "a", 2)
        api.hold(*a)
        loop.run_once()
        assert api.wait_for_binds(set(a))
        assert api.status_patches == []  # nothing written while the binds are out
        api.release()
        cache.drain()
        assert [(k, p) for k, p in api.status_patches if k == "ns/a"] == [("ns/a", "Running")]
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_a_cycle_that_evicts_waits_for_the_apply_in_flight_before_its_evictions_go() -> None:
    """Conservative: the room of a victim is taken by the next cycles (preempt, reclaim), so a cycle that evicts
    applies in line, once the apply in flight is done, as without the pipeline."""
    cache, api = cache_with(CPU)
    loop = loop_for(cache)
    try:
        victim = add_gang(cache, "v", 1)[0]
        with cache.lock:
            bound = copy.deepcopy(cache.pods.objects[victim])
        bound["spec"]["nodeName"] = "n2"
        bound["metadata"]["resourceVersion"] = "2"
        cache.watcher._on_event(cache.pods, "MODIFIED", bound)
        a = add_gang(cache, "a", 1)
        api.hold(*a)
        loop.run_once()
        assert api.wait_for_binds(set(a))
        cache.snapshot()
        evicting, errors = in_thread(lambda: cache.apply(
            CycleResult(evictions=[Eviction("ns/v", victim, "n2", "make room")]), pipelined=True))
        evicting.join(0.0)
        assert evicting.is_alive()  # waits for a's apply, blocked on its held bind
        api.release()
        evicting.join(10)
        assert not evicting.is_alive() and errors == []
        victim_path = f"/api/v1/namespaces/ns/pods/{victim.split('/')[1]}"
        first_eviction = next(i for i, (m, p) in enumerate(api.log) if m != "ANSWERED" and p.startswith(victim_path))
        bind_answered = api.log.index(("ANSWERED", f"/api/v1/namespaces/ns/pods/{a[0].split('/')[1]}/binding"))
        assert bind_answered < first_eviction
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_applies_run_in_the_order_handed_over_and_never_two_behind_the_computing_cycle() -> None:
    applier = Applier()
    gates = [threading.Event() for _ in range(3)]
    ran: list[int] = []
    running = threading.Semaphore(1)  # two applies at once would find it taken
    overlapped: list[int] = []

    def finish(i: int) -> Callable[[Future[Applied] | None], Applied]:
        def run(before: Future[Applied] | None) -> Applied:
            if not running.acquire(blocking=False):
                overlapped.append(i)
            assert before is None or before.done()
            gates[i].wait(10)
            ran.append(i)
            running.release()
            return Applied()
        return run

    try:
        applier.hand_over(finish(0))  # nothing before it: returns at once
        second, errors = in_thread(lambda: applier.hand_over(finish(1)))
        second.join(0.0)
        assert second.is_alive()  # waits until apply 0 is done: cycle 2 would not start before it
        gates[0].set()
        second.join(10)
        assert not second.is_alive() and errors == []
        third, _ = in_thread(lambda: applier.hand_over(finish(2)))
        assert third.is_alive()
        gates[1].set()
        third.join(10)
        gates[2].set()
        applier.drain()
        assert ran == [0, 1, 2] and overlapped == []
    finally:
        for gate in gates:
            gate.set()
        applier.close()


def test_an_apply_that_raised_fails_the_cycle_that_hands_over_the_next() -> None:
    applier = Applier()

    def boom(_: Future[Applied] | None) -> Applied:
        raise RuntimeError("status write broke")

    try:
        applier.hand_over(boom)
        with pytest.raises(RuntimeError, match="status write broke"):
            applier.hand_over(lambda _: Applied())
        applier.drain()
    finally:
        applier.close()


@pytest.mark.parametrize("seed", range(4))
def test_seeded_random_cycles_bind_no_pod_twice_and_overcommit_no_node(seed: int) -> None:
    rng = random.Random(seed)
    nodes = {f"n{i}": rng.choice((2, 3, 4)) for i in range(4)}
    cache, api = cache_with(nodes)
    fail = random.Random(seed + 1000)
    lock = threading.Lock()

    def refuse(_: str) -> bool:
        with lock:
            return fail.random() < 0.25

    def delay(_: str) -> float:
        with lock:
            return fail.choice((0.0, 0.0, 0.002, 0.01))

    api.refuse, api.delay = refuse, delay
    loop = loop_for(cache)
    created: list[str] = []
    try:
        for cycle in range(25):
            for g in range(rng.randint(0, 2)):
                created += add_gang(cache, f"c{cycle}g{g}", rng.randint(1, 3))
            with api.lock:
                landed = [k for k, _ in api.landed]
            for key in rng.sample(landed, k=min(len(landed), rng.randint(0, 2))):
                delete_pod(cache, key)  # completed: its room is free again
            loop.run_once()
            check_no_double_bind_no_overcommit(cache, api, nodes)
        cache.drain()
        check_no_double_bind_no_overcommit(cache, api, nodes)
    finally:
        cache.stop(timeout=1.0)
    assert api.landed, "the run bound something"
    assert len(api.bind_requests) > len(api.landed), "and retried binds that failed"


def check_no_double_bind_no_overcommit(cache: ClusterCache, api: Apiserver, cpus: dict[str, int]) -> None:
    with api.lock:
        landed = list(api.landed)
    counts = Counter(k for k, _ in landed)
    assert [k for k, n in counts.items() if n > 1] == []
    with cache.lock:  # what a node holds now: its bound pods still there, and the binds in flight
        holding: Counter[str] = Counter()
        for key, pod in cache.pods.objects.items():
            node = pod["spec"].get("nodeName") or cache.stores.assumed.get(key, ("", 0.0))[0]
            if node:
                holding[node] += 1
    assert {node: count for node, count in holding.items() if count > cpus[node]} == {}


def test_a_cycle_computed_while_the_last_apply_was_out_writes_nothing_over_that_applys_status() -> None:
    """The second cycle read gang a's PodGroup as it was before the first cycle wrote it Running with its
    Scheduled condition; written as that cycle worked it out, it would drop the condition. Rebased onto what was
    written, it is the same status: not written again."""
    cache, api = cache_with(CPU)
    loop = loop_for(cache)
    try:
        a = add_gang(cache, "a", 2)
        api.hold(*a)
        loop.run_once()
        assert api.wait_for_binds(set(a))
        taken = snapshots_taken(cache)
        second, errors = in_thread(loop.run_once)
        assert taken.wait(10)  # its snapshot taken while a's binds and status write are out
        api.release()
        second.join(10)
        assert errors == []
        for _ in range(2):
            loop.run_once()
        cache.drain()
        assert [(k, p) for k, p in api.status_patches if k == "ns/a"] == [("ns/a", "Running")]
        with cache.lock:
            status = cache.podgroups.objects["ns/a"]["status"]
        assert (status["phase"], [(c["type"], c["status"]) for c in status["conditions"]]) == (
            "Running", [("Scheduled", "True")])
    finally:
        api.release()
        cache.stop(timeout=1.0)


def test_events_wait_while_any_cycles_binds_are_out_not_only_the_last_ones() -> None:
    """With two cycles' binds out at once, the first cycle's binds returning must not let the events compete with
    the second's binds (in line, events are held while a cycle's binds are out, for cache/events.py's DEFER at
    most)."""
    cache, api = cache_with(CPU)
    try:
        a, b = add_gang(cache, "a", 1), add_gang(cache, "b", 1)
        api.hold(*b)
        first = cache.binder.submit(CycleResult(binds=[GangBind("ns/a", ((a[0], "n1"),))]), 0.0)
        second = cache.binder.submit(CycleResult(binds=[GangBind("ns/b", ((b[0], "n2"),))]), 0.0)
        assert cache.binder.wait(first) == {}
        assert cache.events.binds_pending() == 1  # b's bind is still out
        api.release()
        assert cache.binder.wait(second) == {}
        assert cache.events.binds_pending() == 0
    finally:
        api.release()
        cache.stop(timeout=1.0)


class SlowEvents:
    """An apiserver that takes 0.2 s for each Event it is sent (a loaded one), and records them."""

    request_timeout = 5.0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []

    def request(self, method: str, path: str, *, body: object = None, **_: object) -> dict[str, object]:
        threading.Event().wait(0.2)  # the server's own time, not a synchronisation
        with self.lock:
            self.events.append(path)
        return {}


def test_a_stop_given_time_to_flush_sends_the_queued_events_before_the_threads_end() -> None:
    """The scheduler's shutdown gives queued events cache/events.py's DEFER to go out (its Lease is released by
    then): ten events at 0.2 s each on two threads need ~1 s, more than the stop's own 0.5 s would give them."""
    cache, _ = cache_with(CPU)
    slow = SlowEvents()
    cache.events.kube = slow  # type: ignore[assignment]
    for i in range(10):
        key = add_gang(cache, f"g{i}", 1)[0]
        cache.events.record("Pod", key, "Normal", "Scheduled", f"Successfully assigned {key} to n1")
    cache.events.start()
    cache.stop(timeout=0.5, flush=10.0)
    assert len(slow.events) == 10


def test_a_cycle_whose_evictions_fail_to_start_still_counts_its_binds_back() -> None:
    """Binds sent, then the evictions' submit raising (a bug, a pool shut down): the cycle fails, but its binds are
    waited for and counted back, so later events are not held for cache/events.py's DEFER every time."""
    cache, api = cache_with(CPU)
    try:
        a = add_gang(cache, "a", 1)

        def broken(_evictions: object) -> list[Future[None]]:
            raise RuntimeError("cannot schedule new futures after shutdown")

        cache.evictor.submit = broken  # type: ignore[method-assign]
        result = CycleResult(binds=[GangBind("ns/a", ((a[0], "n1"),))],
                             evictions=[Eviction("ns/x", "ns/x-0", "n2", "preempt")])
        with pytest.raises(RuntimeError, match="after shutdown"):
            cache.apply(result)
        assert api.landed == [(a[0], "n1")]
        assert cache.events.binds_pending() == 0
    finally:
        cache.stop(timeout=1.0)


def test_binds_that_fail_to_be_sent_are_not_counted_out() -> None:
    """The bind pool refusing work (shut down) while a cycle's binds are submitted: nothing is left counted out."""
    cache, _api = cache_with(CPU)
    try:
        a = add_gang(cache, "a", 1)
        cache.binder.pool.shutdown(wait=True)
        with pytest.raises(RuntimeError):
            cache.binder.submit(CycleResult(binds=[GangBind("ns/a", ((a[0], "n1"),))]), 0.0)
        assert cache.events.binds_pending() == 0
    finally:
        cache.stop(timeout=1.0)
