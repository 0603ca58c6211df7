"""deviceshare vetoes nodes whose cards cannot hold a share, even when the node's GPU total could."""

from __future__ import annotations

from scheduler.testing import cluster, conf_from_tiers

CONF = conf_from_tiers(("priority", "gang"), ("predicates", "deviceshare"))


def test_two_half_gpu_shares_pack_onto_one_card_so_a_whole_gpu_still_fits() -> None:
    c = cluster().node("n1", gpu=2)
    c.job("a", replicas=1, gpu="0.5")
    c.job("b", replicas=1, gpu="0.5")
    c.cycle(CONF)
    c.cycle(CONF)
    bound_cards = len(c.sim.bound("a")) + len(c.sim.bound("b"))
    assert bound_cards == 2
    # 1 GPU is free in total on n1; whether a whole card is free depends on where the shares went.
    c.job("whole", replicas=1, gpu=1)
    c.cycle(CONF)
    c.cycle(CONF)
    assert len(c.sim.bound("whole")) == 1  # deviceshare packed both shares onto one card


def test_a_whole_gpu_pod_waits_when_the_free_gpu_is_split_over_two_cards() -> None:
    from scheduler.testing import pod_object

    c = cluster().node("n1", gpu=2)
    for card in ("0", "1"):
        pod = pod_object(f"half-{card}", gpu="0.5")
        pod["spec"]["nodeName"] = "n1"
        pod["status"]["phase"] = "Running"
        pod["metadata"]["annotations"]["volcano.sh/gpu-index"] = card
        c.sim.add_pod(pod)
    c.job("whole", replicas=1, gpu=1)
    c.cycle(CONF)
    c.cycle(CONF)
    assert c.sim.bound("whole") == {}
    c.node("n2", gpu=1)
    c.cycle(CONF)
    assert c.sim.bound("whole") == {"whole-0": "n2"}


def test_a_bound_share_carries_the_card_it_was_given() -> None:
    c = cluster().node("n1", gpu=2)
    c.job("a", replicas=1, gpu="0.5")
    c.cycle(CONF)
    annotations = c.sim.pods["default/a-0"].manifest["metadata"]["annotations"]
    assert annotations["volcano.sh/gpu-index"] in ("0", "1")
    assert int(annotations["volcano.sh/predicate-time"]) >= 0
