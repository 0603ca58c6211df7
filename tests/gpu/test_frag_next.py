"""`fgd-next` (the default): FGD plus the waste a card's remainder is expected to end with (W), a card best fit,
the GPUs a node's cpu and memory cannot serve (stranded) and a blend of 70, over every shape seen, counted by
pods."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.gpu.frag import (
    BLENDS,
    CARD_FIT,
    DEFAULT_POLICY,
    LOOKAHEAD,
    MILLI,
    STRAND,
    FragModel,
    GpuArrays,
    Shape,
    bestfit_scores,
    card_waste,
    frag_model,
    mix_for,
    score_nodes,
)


def test_fgd_next_is_the_default_policy():
    assert DEFAULT_POLICY == "fgd-next"


def test_card_waste_of_a_single_shape_is_what_repeated_pods_of_it_leave():
    # Only 600-milli shares: a card with r < 600 keeps r; with 600..999 one more fits; 1000 takes one, keeps 400.
    waste = card_waste(np.array([600]), np.array([1.0]))
    assert waste[599] == pytest.approx(599)
    assert waste[700] == pytest.approx(100)
    assert waste[MILLI] == pytest.approx(400)


def test_card_waste_weighs_the_next_pod_by_the_mix():
    # Half 500-milli shares, half whole GPUs. W(500) = 0.5 x 500 (a whole GPU comes: never fits) + 0.5 x W(0);
    # W(1000) = 0.5 x W(500) + 0.5 x W(0): both shapes fit an idle card.
    waste = card_waste(np.array([500, 1000]), np.array([0.5, 0.5]))
    assert waste[500] == pytest.approx(250)
    assert waste[MILLI] == pytest.approx(125)
    assert waste[0] == 0


def one_card(free: int) -> GpuArrays:
    return GpuArrays(np.array([[free]]), [64_000], [10**6], ["T4"], [1])


def test_the_look_ahead_adds_the_growth_of_the_cards_waste_to_a_shares_growth():
    mix = [(Shape(1000, 1, 1, 300), 0.5), (Shape(1000, 1, 1, 400), 0.5)]
    share = Shape(1000, 1, 1, 300)
    node = np.arange(1)
    plain = FragModel(one_card(1000), mix).growth(share, node)[0]
    ahead = FragModel(one_card(1000), mix, lookahead=3.0)
    waste = card_waste(np.array([300, 400]), np.array([0.5, 0.5]))
    assert ahead.growth(share, node)[0] == pytest.approx(plain + 3.0 * (waste[700] - waste[1000]))
    assert frag_model("fgd-next", one_card(1000), mix).lookahead == LOOKAHEAD["fgd-next"]
    assert frag_model("fgd-blend", one_card(1000), mix).lookahead == 0.0


def test_the_look_ahead_chooses_the_card_whose_remainder_wastes_least():
    # One node, cards with 1000 and 900 free; the mix: 200 and 300 shares. A 200 share leaves 800 or 700, and
    # both fit every shape, so FGD sees no growth either way and takes the fuller card. Looking further, 700
    # ends with more idle than 800 (W = 87.5 and 75, against 81.25 for both 1000 and 900): the idle card wins.
    a = GpuArrays(np.array([[1000, 900]]), [64_000], [10**6], ["T4"], [2])
    mix = [(Shape(1000, 1, 1, 200), 0.5), (Shape(1000, 1, 1, 300), 0.5)]
    waste = card_waste(np.array([200, 300]), np.array([0.5, 0.5]))
    assert [waste[r] for r in (700, 800, 900, 1000)] == pytest.approx([87.5, 75, 81.25, 81.25])
    share = Shape(1000, 1, 1, 200)
    assert FragModel(a, mix).growth(share, np.arange(1))[1][0] == 1, "FGD alone: the fuller card on a tie"
    assert FragModel(a, mix, lookahead=1.0).growth(share, np.arange(1))[1][0] == 0


def test_the_score_is_minus_growth_plus_the_blend_and_the_card_fit():
    a = GpuArrays(np.array([[1000, 0], [700, 1000]]), [64_000, 32_000], [10**6, 10**6], ["T4", "T4"], [2, 2])
    mix = [(Shape(1000, 1, 1, 300), 0.5), (Shape(1000, 1, 1, 1000), 0.5)]
    share = Shape(1000, 1, 1, 300)
    nodes = np.arange(2)
    frag = frag_model("fgd-next", a, mix)
    growth, device = frag.growth(share, nodes)
    kept = a.free[nodes, device] - share.milli
    expected = -growth + BLENDS["fgd-next"] * bestfit_scores(a, share, nodes, 64_000, 2000)
    expected -= CARD_FIT["fgd-next"] * kept / MILLI
    scored = score_nodes("fgd-next", a, share, nodes, frag)
    assert scored.scores == pytest.approx(expected)
    assert list(scored.share_device) == list(device)


def test_the_fgd_next_mix_counts_pods_and_keeps_every_shape():
    mix = mix_for("fgd-next")
    one, eight, rare = Shape(8000, 1, 1, 1000), Shape(64_000, 1, 8, 1000), Shape(1000, 1, 1, 50)
    for shape in [one] * 98 + [eight, rare]:
        mix.observe(shape)
    p = dict(mix.top())
    assert p[eight] == pytest.approx(p[rare]) == pytest.approx(0.01)
    assert p[one] == pytest.approx(0.98)


def test_stranded_is_the_free_gpu_the_nodes_cpu_and_memory_cannot_serve_at_the_mixs_rate():
    # The mix asks 10 cores and 40 units of memory per GPU: 1,000 milli cpu and 4 memory per 100 milli GPU.
    mix = [(Shape(10_000, 40, 1, 1000), 0.5), (Shape(5_000, 20, 1, 500), 0.5)]
    a = GpuArrays(
        np.array([[1000, 1000], [1000, 1000], [1000, 0]]),
        [5_000, 64_000, 64_000],
        [10**6, 10**6, 20],
        ["T4"] * 3,
        [2, 2, 2],
    )
    frag = FragModel(a, mix, strand=1.0)
    assert frag.cpu_per == pytest.approx(10.0) and frag.mem_per == pytest.approx(0.04)
    # node 0: 5 cores serve 500 of 2,000 free milli; node 1: cpu for all; node 2: memory 20 serves 500 of 1,000.
    stranded = frag.stranded(a.free.sum(axis=1), a.cpu, a.memory)
    assert stranded == pytest.approx([1500.0, 0.0, 500.0])
    plain = FragModel(a, mix)
    assert frag.frag == pytest.approx(plain.frag + stranded)
    assert frag_model("fgd-next", a, mix).strand == STRAND["fgd-next"] > 0
    assert frag_model("fgd-blend", a, mix).strand == 0.0


def test_stranding_sends_a_cpu_heavy_share_to_the_node_with_cpu_to_spare():
    # Two idle two-card nodes, 24 and 104 cores. The mix: cpu-light 810 shares (3 cores) and cpu-heavy 470 ones
    # (12 cores), 11.7 cores per GPU on average. A 470 share leaves both nodes able to run both shapes, so FGD
    # sees the same growth on both (the 530 left on its card is too small for an 810); counting the GPU its cpu
    # can no longer serve (12 cores left for 1,530 milli on the small node), it goes to the 104-core node.
    a = GpuArrays(np.array([[1000, 1000], [1000, 1000]]), [24_000, 104_000], [10**6, 10**6], ["T4", "T4"], [2, 2])
    light, heavy = Shape(3_000, 1, 1, 810), Shape(12_000, 1, 1, 470)
    mix = [(light, 0.5), (heavy, 0.5)]
    nodes = np.arange(2)
    plain = FragModel(a, mix).growth(heavy, nodes)[0]
    assert plain == pytest.approx([265.0, 265.0])
    growth = FragModel(a, mix, strand=1.0).growth(heavy, nodes)[0]
    assert growth[1] == pytest.approx(265.0)
    assert growth[0] == pytest.approx(265.0 + 1530 - 12_000 * 640 / 7_500)
    assert np.argmax(score_nodes("fgd-blend", a, heavy, nodes, frag_model("fgd-blend", a, mix)).scores) == 0
    assert np.argmax(score_nodes("fgd-next", a, heavy, nodes, frag_model("fgd-next", a, mix)).scores) == 1
