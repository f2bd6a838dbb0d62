"""Two small helpers of the chooser against their plain loops, on hypothesis draws of factor
splits: choose_split._each_axis_once (each mesh axis splits one factor at most; a split naming
no axis twice is only put in factor order) against its loop alone (_cut_repeats), and
split_cost._yielding (a split's axes cut before the first axis another split uses) against the
loop it replaced, kept here. Items are compared in order: a sanitized split is a dict in factor
order, and callers key caches by it."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from gspmd_viz.core.choice.choose_split import _cut_repeats, _each_axis_once
from gspmd_viz.core.cost.split_cost import _yielding

AXES = st.sampled_from(["x", "y", "z", "w"])
SPLITS = st.dictionaries(
    st.integers(0, 5), st.lists(AXES, min_size=1, max_size=3).map(tuple), max_size=4
)


def _yielding_reference(fa: dict, to: dict) -> dict:
    taken = {a for axes in to.values() for a in axes}
    cut = {f: tuple(itertools.takewhile(lambda a: a not in taken, axes)) for f, axes in fa.items()}
    return {f: axes for f, axes in cut.items() if axes}


@given(SPLITS)
def test_each_axis_once_is_the_loop_it_replaced(fa):
    assert list(_each_axis_once(fa).items()) == list(_cut_repeats(fa).items())


@given(SPLITS, SPLITS)
def test_yielding_is_the_takewhile_it_replaced(fa, to):
    assert list(_yielding(fa, to).items()) == list(_yielding_reference(fa, to).items())


def test_a_split_naming_an_axis_twice_is_cut():
    assert _each_axis_once({2: ("x",), 0: ("y", "x")}) == {0: ("y", "x")}
    assert _yielding({0: ("x", "y"), 1: ("z",)}, {3: ("y",)}) == {0: ("x",), 1: ("z",)}
