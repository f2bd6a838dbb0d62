"""A collective-permute whose every device keeps its own data is known without pairing devices
(Mover.keeps_own, asked by Mover.rounds before round_count's pass over every device): each
dim's axes grow at its end and nest, or grow at its start by axes that only add shards of
padding (4 rows over model=4 to 4 over (data, model) on 2x4: the devices at data = 1 hold
padding only, the others the rows they held).

The references: the device-level pairing (permute_rounds), on every spec and target of up to
two dims over small meshes (uneven dims, dims of 0 and 1 elements, size-1 axes), and whole
plans made with the shortcut switched off (the zoo's and the library models' plans,
hypothesis draws).
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from library_models import MODELS, build
from test_reshard_early_stops import asked_plans, cases

import gspmd_viz as gv
from gspmd_viz.core.reshard.permute_rounds import moving, permute_rounds
from gspmd_viz.core.reshard.planner import reshard_plan
from gspmd_viz.core.reshard.steps import Mover
from gspmd_viz.zoo import examples

MESHES = [{"x": 8}, {"x": 2, "y": 4}, {"x": 4, "y": 2}, {"x": 2, "y": 1, "z": 2}]


def grown_targets(axes: tuple, free: tuple):
    """Every (spec dim, target dim): the spec's axes with some free axes put before them,
    after them, or both."""
    for k in range(len(free) + 1):
        for added in itertools.permutations(free, k):
            for cut in range(len(added) + 1):
                yield axes, added[:cut] + axes + added[cut:]


def spec_target_pairs(names: tuple, ndim: int):
    """(spec, target) pairs of `ndim` dims where each target dim grows its spec dim."""
    for placed in itertools.product(range(-1, ndim), repeat=len(names)):
        spec = tuple(
            tuple(a for a, d in zip(names, placed, strict=True) if d == i) for i in range(ndim)
        )
        free = tuple(a for a, d in zip(names, placed, strict=True) if d == -1)
        per_dim = [list(grown_targets(axes, free)) for axes in spec]
        for dims in itertools.product(*per_dim):
            target = tuple(want for _, want in dims)
            used = [a for want in target for a in want]
            if len(used) == len(set(used)) and target != spec:
                yield spec, target


def test_a_permute_said_to_keep_every_devices_data_moves_nothing():
    """keeps_own says yes only where the pairing moves nothing; and it says yes for targets
    grown at the start (not only those holds_own knows), so the shortcut is exercised."""
    at_start = 0
    for sizes in MESHES:
        mesh = gv.Mesh(sizes)
        for ndim, sizes_n in ((1, range(0, 10)), (2, (1, 3, 4, 6))):
            for shape in itertools.product(sizes_n, repeat=ndim):
                for spec, target in spec_target_pairs(mesh.axis_names, ndim):
                    mover = Mover(mesh, shape, np.dtype("float32"), "", (target, frozenset()))
                    if not mover.keeps_own(spec, target):
                        continue
                    old, new = gv.Sharding(mesh, spec), gv.Sharding(mesh, target)
                    assert moving(permute_rounds(old, new, shape)) == [], (
                        sizes,
                        shape,
                        spec,
                        target,
                    )
                    at_start += not mover.holds_own(spec, target)
    assert at_start > 100


def test_rows_that_straddle_blocks_are_not_said_to_be_kept():
    """5 rows over model=4 (2 a shard) to (data, model) on 2x4 (1 a shard): the device at
    model = 1 wants row 1, held by the device at model = 0: it is sent. With 4 rows (1 a
    shard either way) nothing moves."""
    mesh = gv.Mesh({"data": 2, "model": 4})
    spec, target = (("model",),), (("data", "model"),)
    for rows, kept in ((5, False), (4, True)):
        mover = Mover(mesh, (rows,), np.dtype("float32"), "", (target, frozenset()))
        assert mover.keeps_own(spec, target) is kept
        pairing = permute_rounds(gv.Sharding(mesh, spec), gv.Sharding(mesh, target), (rows,))
        assert (moving(pairing) == []) is kept


def assert_same_plan_without_the_shortcut(src, dst, shape, dtype) -> None:
    plan = reshard_plan(src, dst, shape, dtype)
    wire_bytes = plan.wire_bytes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Mover, "keeps_own", lambda self, spec, target: False)
        slow = reshard_plan(src, dst, shape, dtype)
        assert plan.steps == slow.steps
        assert wire_bytes == slow.wire_bytes


@pytest.mark.parametrize("name", list(MODELS))
def test_a_library_models_plans_equal_those_made_without_the_shortcut(name):
    f, args = build(name)
    for src, dst, shape, dtype in asked_plans(f, args):
        assert_same_plan_without_the_shortcut(src, dst, shape, dtype)


@pytest.mark.parametrize("name", sorted(examples.ZOO))
def test_a_zoo_programs_plans_equal_those_made_without_the_shortcut(name):
    ex = examples.get(name)
    for src, dst, shape, dtype in asked_plans(ex.fn, ex.args):
        assert_same_plan_without_the_shortcut(src, dst, shape, dtype)


@settings(max_examples=300)
@given(cases(pending=False))
def test_plans_equal_those_made_without_the_shortcut(case):
    assert_same_plan_without_the_shortcut(*case)
