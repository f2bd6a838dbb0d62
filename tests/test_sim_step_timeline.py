"""gv.sim.step_timeline: a step's collectives on a pod, every group at once, link by link.

Oracles: the closed forms (placement.collective_seconds, the simulator's own tests' oracle) where
groups share no link, the link-level simulation of one group alone, and hand counts of the
bytes crossing links (each transfer's bytes times the hops of its route).
"""

import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.sim import placement as pl
from gspmd_viz.sim import step_timeline as stl

SLICE = gv.sim.preset("4x4")
SQUARE = {"x": 4, "y": 4}  # x -> dim 0, y -> dim 1: every group a whole wrapped dim
S = 3 * 2**16  # splits evenly into every schedule's chunks here
RING = {  # bytes each chip sends in a ring algorithm, n chips per group (Collective's formulas)
    "all-reduce": lambda n: 2 * (n - 1) / n * S,
    "all-gather": lambda n: (n - 1) / n * S,
    "reduce-scatter": lambda n: (n - 1) / n * S,
}


def test_group_chips_splits_the_pod_into_the_groups_of_each_axis():
    where = pl.place({"x": 2, "y": 8}, SLICE)  # y: dim 1 (4) x rows 0-1 / 2-3; x: rows 2 apart
    x = pl.group_chips(where, ("x",), SLICE)
    assert x.shape == (8, 2) and x[0].tolist() == [0, 8] and x[5].tolist() == [5, 13]
    y = pl.group_chips(where, ("y",), SLICE)
    assert y.tolist() == [list(range(8)), list(range(8, 16))]
    both = pl.group_chips(where, ("x", "y"), SLICE)
    assert sorted(both.ravel().tolist()) == list(range(16))


@pytest.mark.parametrize("kind", sorted(RING))
@pytest.mark.parametrize("axes", [("x",), ("y",), ("x", "y")])
def test_one_collective_on_whole_dims_times_like_its_closed_form(kind, axes):
    tl = stl.simulate_step([(kind, axes, S)], SQUARE, SLICE)
    (run,) = tl.collectives
    sub = pl.sub_torus(pl.place(SQUARE, SLICE), axes, SLICE)
    assert run.time_s == pytest.approx(pl.collective_seconds(kind, S, sub), rel=1e-9)
    assert run.time_s == pytest.approx(gv.sim.simulate(sub, kind, S).time_s, rel=1e-9)
    # neighbour rings: every byte a chip sends crosses one link
    assert run.link_bytes == pytest.approx(16 * RING[kind](sub.n_chips), rel=1e-12)
    assert tl.time_s == run.time_s


def test_all_to_all_link_bytes_count_every_hop():
    tl = stl.simulate_step([("all-to-all", "y", S)], SQUARE, SLICE)
    # each chip sends S/4 to the 3 others of its 4-ring: 1 + 2 + 1 hops
    assert tl.collectives[0].link_bytes == pytest.approx(16 * S / 4 * (1 + 2 + 1))
    sub = gv.sim.torus((4,), True)
    assert tl.time_s == pytest.approx(pl.collective_seconds("all-to-all", S, sub), rel=1e-9)


def test_groups_that_share_links_slow_each_other_down():
    """x = 2 chips two rows apart (y took dim 1 and the row pairs): every transfer goes 2 hops
    the + way round dim 0 (a tie), so each + link of dim 0 carries 4 transfers of S/4 in the
    one step of a 2-chip bidirectional-ring all-gather: S / beta + 2 hops, where one pair alone
    (as neighbours) needs 2 transfers of S/4 on its one cable and 1 hop."""
    chip = gv.sim.chip("tpu-v3")
    beta, alpha = chip.ici_link_bandwidth_Bps, chip.hop_latency_s
    (run,) = stl.simulate_step([("all-gather", "x", S)], {"x": 2, "y": 8}, SLICE).collectives
    assert run.groups == 8 and run.sub.shape == (2,)
    assert run.time_s == pytest.approx(S / beta + 2 * alpha, rel=1e-12)
    assert run.closed_form_s == pytest.approx(S / 2 / beta + alpha, rel=1e-12)
    assert run.link_bytes == pytest.approx(16 * S / 2 * 2)  # half of S per chip, 2 hops


def test_a_whole_step_is_the_sum_of_its_collectives_times_their_counts():
    records = [("all-gather", ("x",), S), ("all-reduce", ("y",), S, 3),
               ("reduce-scatter", ("x", "y"), S), ("all-to-all", ("y",), S, 2)]  # fmt: skip
    tl = stl.simulate_step(records, SQUARE, SLICE)
    where = pl.place(SQUARE, SLICE)
    closed = sum(
        (r[3] if len(r) == 4 else 1)
        * pl.collective_seconds(r[0], S, pl.sub_torus(where, r[1], SLICE))
        for r in records
    )
    assert tl.time_s == pytest.approx(closed, rel=1e-9)
    # the replay holds each collective once, one after another, and says which one runs
    assert [c.first_step for c in tl.collectives] == list(
        np.cumsum([0] + [c.n_steps for c in tl.collectives[:-1]])
    )
    assert len(tl.steps) == sum(c.n_steps for c in tl.collectives)
    assert [s.index for s in tl.steps] == list(range(len(tl.steps)))
    assert tl.phases[tl.steps[-1].phase].name.startswith("4/4 all-to-all over y")
    assert "communication per step" in tl.summary()


def test_nothing_to_move_takes_no_time():
    tl = stl.simulate_step([("all-reduce", ("x",), 0), ("all-gather", (), S)], SQUARE, SLICE)
    assert tl.time_s == 0 and not tl.steps
    assert [c.algorithm for c in tl.collectives] == ["", ""]


def test_bad_records_get_clear_errors():
    with pytest.raises(ValueError, match="collective-permute.*collective_seconds"):
        stl.simulate_step([("collective-permute", ("x",), S)], SQUARE, SLICE)
    with pytest.raises(ValueError, match="count must be a positive integer"):
        stl.simulate_step([("all-reduce", ("x",), S, 0)], SQUARE, SLICE)
    with pytest.raises(ValueError, match="bytes must be a number"):
        stl.simulate_step([("all-reduce", ("x",), -1)], SQUARE, SLICE)
    with pytest.raises(ValueError, match=r"\(kind, axes, bytes\)"):
        stl.simulate_step(["all-reduce"], SQUARE, SLICE)
    with pytest.raises(ValueError, match="not placed"):
        stl.simulate_step([("all-reduce", ("z",), S)], SQUARE, SLICE)
