"""Pipeline schedules as data and their simulation, against the closed forms."""

import itertools

import numpy as np
import pytest

import gspmd_viz as gv
from gspmd_viz.sim.pipelines import pipeline_timing

pipe = gv.pipeline
MULTI = ("interleaved-1f1b", "circular")


def _grid():
    for name, S in itertools.product(pipe.SCHEDULES, (2, 4, 8)):
        for M, V in itertools.product((S, 2 * S, 4 * S), (1, 2, 4)):
            if V == 1 or name in MULTI:
                yield name, S, M, V


@pytest.mark.parametrize("name,S,M,V", [g for g in _grid() if g[0] != "zb-h1"])
def test_every_schedule_meets_its_closed_form_exactly(name, S, M, V):
    sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
    bubble = (S - 1) / (V * M + S - 1)  # the published formulas, written out here
    assert pipe.bubble_fraction(name, stages=S, microbatches=M, virtual=V) == bubble
    for f, b in [(1.0, 2.0), (1.0, 1.0), (1.0, 3.0), (2.0, 1.0)]:
        tl = pipe.simulate(sched, forward=f, backward=b)
        assert tl.makespan == (M + (S - 1) / V) * (f + b)
        assert tl.bubble_fraction == bubble


@pytest.mark.parametrize("S,M", [(S, M) for name, S, M, _ in _grid() if name == "zb-h1"])
def test_zero_bubble_h1_meets_its_closed_form_when_w_is_not_the_longest(S, M):
    sched = pipe.schedule("zb-h1", stages=S, microbatches=M)
    for f, b, w in [(1.0, 1.0, 1.0), (1.0, 2.0, 1.0), (2.0, 1.0, 1.0), (2.0, 3.0, 2.0)]:
        tl = pipe.simulate(sched, forward=f, backward=b, weight=w)
        idle = (S - 1) * (f + b - w)  # Qi et al.: ZB-H1's bubble, (S-1)(T_F + T_B - T_W)
        assert tl.makespan == M * (f + b + w) + idle
        bubble = idle / (M * (f + b + w) + idle)
        assert tl.bubble_fraction == bubble
        assert pipe.bubble_fraction("zb-h1", S, M, forward=f, backward=b, weight=w) == bubble
        assert tl.peak_activations == tuple([float(S)] * S)  # 1F1B's stage-0 peak, everywhere
    one_f_one_b = pipe.simulate(pipe.schedule("1f1b", stages=S, microbatches=M), 1.0, 2.0)
    zero = pipe.simulate(sched, 1.0, 1.0, weight=1.0)  # same work: B = 2 split into B + W
    assert zero.makespan - 3 * M == (one_f_one_b.makespan - 3 * M) / 3


@pytest.mark.parametrize("name,S,M,V", list(_grid())[::5])
def test_every_microbatch_passes_every_layer_once_on_its_stage(name, S, M, V):
    sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
    acts = sched.actions()
    for kind in "FB":
        done = sorted((a.microbatch, a.layer) for a in acts if a.kind == kind)
        assert done == sorted(itertools.product(range(M), range(S * V)))
    assert all(a.stage == a.layer % S and a.chunk == a.layer // S for a in acts)


@pytest.mark.parametrize("name,S,M,V", list(_grid())[::3])
def test_lockstep_ticks_respect_every_dependency(name, S, M, V):
    sched = pipe.schedule(name, stages=S, microbatches=M, virtual=V)
    tick = {(a.kind, a.microbatch, a.layer): a.tick for a in sched.actions()}
    L = S * V
    for (kind, m, lay), t in tick.items():
        if kind == "F" and lay > 0:
            assert tick["F", m, lay - 1] < t
        if kind == "B":
            assert tick["F", m, lay] < t
            if lay < L - 1:
                assert tick["B", m, lay + 1] < t
        if kind == "W":
            assert tick["B", m, lay] < t
    table = sched.table()  # one action per stage per tick
    assert (table >= 0).sum() == len(sched.kind)


@pytest.mark.parametrize("S,M", [(2, 2), (4, 2), (4, 8), (8, 4), (8, 32)])
def test_peak_activations_gpipe_holds_all_1f1b_holds_few(S, M):
    gpipe = pipe.simulate(pipe.schedule("gpipe", stages=S, microbatches=M))
    assert gpipe.peak_activations == tuple([float(M)] * S)
    one = pipe.simulate(pipe.schedule("1f1b", stages=S, microbatches=M), forward=1.0, backward=2.0)
    assert one.peak_activations == tuple(float(min(S - i, M)) for i in range(S))
    times, held = one.memory(0)
    assert held[-1] == 0 and held.max() == one.peak_activations[0] and len(times) == len(held)


def test_circular_walks_like_the_gspmd_loop():
    # praxis: at iteration t stage i works on k = t - i, microbatch k % M, repeat k // M
    S, M, V = 4, 6, 2
    sched = pipe.schedule("circular", stages=S, microbatches=M, virtual=V)
    for a in sched.actions():
        if a.kind == "F":
            k = a.tick - a.stage
            assert (a.microbatch, a.chunk) == (k % M, k // M)
    assert sched.n_ticks == 2 * (V * M + S - 1)  # forward loop, then its backward
    tl = pipe.simulate(sched, 1.0, 2.0)
    assert tl.bubble_fraction == (S - 1) / (V * M + S - 1)  # M need not be a multiple of S


def test_circular_with_one_repeat_is_gpipe():
    a = pipe.schedule("circular", stages=4, microbatches=6, virtual=1)
    b = pipe.schedule("gpipe", stages=4, microbatches=6)
    assert a.text() == b.text()


def test_schedule_text_shows_the_table():
    text = pipe.schedule("1f1b", stages=2, microbatches=3).text()
    assert text.splitlines()[0].split() == ["stage", "0:", "F0", "F1", ".", "B0", "F2", "B1", "."
                                            , "B2"]  # fmt: skip


def test_free_of_transfers_gpipe_pays_two_waves_of_hops():
    # Each forward and backward wave crosses S-1 stage boundaries: 2(S-1) transfers.
    S, M, c = 4, 8, 0.25
    tl = pipe.simulate(pipe.schedule("gpipe", stages=S, microbatches=M), 1.0, 2.0, transfer=c)
    assert tl.makespan == (M + S - 1) * 3.0 + 2 * (S - 1) * c


def test_placement_prices_transfers_with_the_chip_links():
    topo = gv.sim.torus((8,))
    chip = gv.sim.chip("tpu-v3")
    placed = pipe.place(8, topo, chip="tpu-v3")
    assert placed.chips == tuple(range(8))
    assert placed.hops[0, 7] == 1 and placed.hops[0, 4] == 4  # wraparound
    nbytes = 2**20
    one_hop = chip.hop_latency_s + nbytes / chip.ici_link_bandwidth_Bps
    m = placed.transfer_matrix(nbytes)
    assert m[0, 1] == one_hop and m[3, 3] == 0 and m[0, 4] == 4 * chip.hop_latency_s + (
        nbytes / chip.ici_link_bandwidth_Bps)  # fmt: skip
    rows = pipe.place(4, gv.sim.torus((4, 4)), layout="rows")
    assert rows.chips == (0, 4, 8, 12) and rows.hops[3, 0] == 1
    snake = pipe.place(8, gv.sim.torus((4, 4)))
    assert all(snake.hops[i, i + 1] == 1 for i in range(7))
    sched = pipe.schedule("gpipe", stages=8, microbatches=8)
    tl = pipe.simulate(sched, 1e-3, 2e-3, transfer=m)
    assert np.isclose(tl.makespan, (8 + 7) * 3e-3 + 2 * 7 * one_hop, rtol=1e-12)
    assert {(a, b) for a, b, _ in placed.routes(sched)} == {(i, i + 1) for i in range(7)} | {
        (i + 1, i) for i in range(7)}  # fmt: skip


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: pipe.schedule("pipedream", 4, 8), "unknown pipeline schedule"),
        (lambda: pipe.schedule("gpipe", 0, 8), "stages must be a positive"),
        (lambda: pipe.schedule("gpipe", 4, 2.5), "microbatches must be"),
        (lambda: pipe.schedule("1f1b", 4, 8, virtual=2), "one chunk per stage"),
        (lambda: pipe.schedule("interleaved-1f1b", 4, 6, virtual=2), "multiple of 4"),
        (lambda: pipe.bubble_fraction("interleaved-1f1b", 4, 6, virtual=2), "multiple of 4"),
        (lambda: pipe.schedule("circular", 4, 3, virtual=2), "microbatches >= stages = 4"),
        (lambda: pipe.schedule("zb-h1", 4, 3), "microbatches >= 4"),
        (lambda: pipe.bubble_fraction("zb-h1", 4, 8, weight=3), "weight <= forward"),
        (lambda: pipe.simulate(pipe.schedule("gpipe", 2, 2), forward=0), "forward must be"),
        (lambda: pipe.simulate(pipe.schedule("gpipe", 2, 2), backward=-1), "backward must be"),
        (lambda: pipe.simulate(pipe.schedule("gpipe", 2, 2), transfer=[1, 2]), r"\[S, S\]"),
        (lambda: pipe.place(4, gv.sim.torus((2, 2)), layout="rows"), "rows"),
        (lambda: pipe.place(9, gv.sim.torus((8,))), "9 distinct chips"),
        (lambda: pipe.place(2, gv.sim.torus((8,)), chips=(0, 8)), "chip ids"),
    ],
)
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_deadlocking_order_is_reported():
    sched = pipe.schedule("gpipe", stages=2, microbatches=2)
    swapped = np.concatenate([sched.kind[:4][::-1], sched.kind[4:]])  # stage 0: B before F
    with pytest.raises(pipe.ScheduleDeadlock, match="deadlocks"):
        pipeline_timing.start_times(sched.stage, swapped, sched.microbatch, sched.chunk, 2, 1,
                                    np.ones(8))  # fmt: skip
