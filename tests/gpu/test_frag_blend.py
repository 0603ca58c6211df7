"""`fgd-blend`: FGD growth plus a small best-fit term, over a mix of every shape weighted by GPUs^0.3."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.gpu.frag import BLEND, FragModel, GpuArrays, Shape, ShapeMix, mix_for, score_nodes


def two_nodes() -> GpuArrays:
    """Node 0: eight idle cards; node 1: one card with 700 milli free (same cpu and memory)."""
    free = np.zeros((2, 8), dtype=np.int64)
    free[0, :] = 1000
    free[1, 0] = 700
    return GpuArrays(free, [64_000, 64_000], [10**6, 10**6], ["T4", "T4"], [8, 1])


@pytest.mark.parametrize(
    ("p_half", "blend_node", "why"),
    [
        (0.05, 1, "10 milli more growth on the full node is worth less than its best fit"),
        (0.5, 0, "100 milli more growth on the full node outweighs its best fit"),
    ],
)
def test_blend_trades_a_little_fragmentation_for_best_fit_but_not_a_lot(p_half: float, blend_node: int, why: str):
    # Mix: 500-milli shares (p_half) and 100-milli shares. A 500 share on an idle card leaves 500: nothing gets
    # unusable (growth 0). On node 1's 700 card it leaves 200, unusable for the 500 shares: growth 200 x p_half.
    a = two_nodes()
    half, tenth = Shape(1000, 1, 1, 500), Shape(1000, 1, 1, 100)
    frag = FragModel(a, [(half, p_half), (tenth, 1 - p_half)])
    nodes = np.arange(2)
    growth, _ = frag.growth(half, nodes)
    assert growth == pytest.approx([0.0, 200 * p_half])
    plain = score_nodes("fgd-bestfit", a, half, nodes, frag)
    blend = score_nodes("fgd-blend", a, half, nodes, frag)
    assert int(np.argmax(plain.scores)) == 0, "fgd-bestfit only breaks exact ties best-fit"
    assert int(np.argmax(blend.scores)) == blend_node, why


def test_the_blend_term_is_worth_at_most_blend_milli_of_growth():
    a = two_nodes()
    shape = Shape(1000, 1, 1, 500)
    frag = FragModel(a, [(shape, 1.0)])
    nodes = np.arange(2)
    growth, _ = frag.growth(shape, nodes)
    extra = score_nodes("fgd-blend", a, shape, nodes, frag).scores + growth
    assert (extra <= 0).all() and (extra >= -BLEND).all()
    assert extra[1] > extra[0]  # the fuller node gets the larger (less negative) best-fit term


def test_the_blend_mix_weighs_shapes_by_gpus_to_the_power_0_3_and_keeps_every_shape():
    mix = mix_for("fgd-blend")
    one, eight = Shape(8000, 1, 1, 1000), Shape(64_000, 1, 8, 1000)
    mix.observe(one)
    mix.observe(eight)
    p = dict(mix.top())
    assert p[eight] / p[one] == pytest.approx(8**0.3)

    common, rare = Shape(8000, 1, 1, 1000), Shape(1000, 1, 1, 50)
    blend, weighted = mix_for("fgd-blend"), mix_for("fgd-weighted")
    for m in (blend, weighted):
        for _ in range(99):
            m.observe(common)
        m.observe(rare)
    assert rare in dict(blend.top()), "the rare small share fills gaps: fgd-blend keeps it"
    assert rare not in dict(weighted.top()), "fgd-weighted keeps the shapes covering 95% of the weight"


def test_an_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="gpu\\^0.3"):
        ShapeMix(weighting="gpu")
