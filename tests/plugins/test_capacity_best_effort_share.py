"""capacity: a queue that deserves nothing is best-effort, share 1 (Volcano's updateQueueAttrShare,
plugins/capacity/capacity.go), so it is served after a queue below its deserved share. With share 0 it went
first, and under gangreclaim a victim's recreated pods took back the room reclaimed for the other queue every
cycle (differential preemption seed 39: 90 evictions where Volcano made 3)."""

from __future__ import annotations

from scheduler.testing import cluster, conf_from_tiers, pod_object

CONF = conf_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "capacity", "nodeorder"],
                       actions="allocate, backfill, gangreclaim, gangpreempt")


def test_a_queue_that_deserves_nothing_is_served_after_one_below_its_share() -> None:
    c = cluster().nodes("n", 1, cpu="1000m", memory="1000Mi")
    c.queue("owed", deserved={"cpu": "3000m", "memory": "3000Mi"})
    c.queue("besteffort", deserved={"cpu": "0m", "memory": "0Mi"})
    c.job("held", queue="owed", replicas=1, cpu="100m", memory="100Mi")  # owed holds 1/30 of its share
    c.job("extra", queue="besteffort", replicas=1, cpu="100m", memory="100Mi")  # besteffort holds something too
    c.cycle(CONF)
    c.job("b", queue="besteffort", replicas=1, cpu="800m", memory="800Mi")
    c.job("a", queue="owed", replicas=1, cpu="800m", memory="800Mi")
    c.cycle(CONF)
    assert len(c.sim.bound("a")) == 1 and c.sim.bound("b") == {}


def test_reclaimed_room_goes_to_the_reclaimer_not_back_to_the_victims_recreated_pods() -> None:
    c = cluster().priority_class("low", 10).priority_class("high", 1000).nodes("n", 3, cpu="1000m", memory="1000Mi")
    c.queue("q0", deserved={"cpu": "3000m", "memory": "3000Mi"})
    c.queue("qx", deserved={"cpu": "0m", "memory": "0Mi"})
    c.job("victim", queue="qx", replicas=4, cpu="500m", memory="500Mi", priority_class="low")
    c.job("mine", queue="q0", replicas=2, cpu="500m", memory="500Mi", priority_class="low")
    c.cycle(CONF)
    c.job("hi", queue="q0", replicas=2, cpu="500m", memory="500Mi", priority_class="high")
    evictions = 0
    for _ in range(6):
        result = c.cycle(CONF)
        evictions += len(result.evictions)
        for e in result.evictions:  # the victim's controller recreates each evicted pod under a new name
            name = e.task.split("/", 1)[1]
            c.sim.add_pod(pod_object(f"{name}-r", group="victim", cpu="500m", memory="500Mi", priority_class="low"))
    assert len(c.sim.bound("hi")) == 2
    assert evictions == 4, "one whole bundle, once"
