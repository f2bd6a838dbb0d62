"""Layout view: blocks, text and figure, each checked against Sharding's own slices."""

import json
import math

import numpy as np
import plotly.graph_objects as go
from hypothesis import given
from strategies import sharded_shapes

import gspmd_viz as gv
from gspmd_viz.viz.arrays.blocks import blocks, device_label, layout_text
from gspmd_viz.viz.arrays.layout import MAX_FACETS, PALETTE, layout_figure


@given(sharded_shapes(max_devices=64))
def test_each_device_is_in_one_block_with_its_own_slices(case):
    sharding, shape = case
    slices = sharding.device_slices(shape)
    local = sharding.shard_shape(shape)
    seen = []
    for block in blocks(sharding, shape):
        seen += block.devices
        for device in block.devices:
            assert block.slices == slices[device]
        padded = [b - a for a, b in zip(block.start, block.padded_stop, strict=True)]
        # a block whose data ran out entirely is all padding, still one local shard's worth
        assert math.prod(padded) == math.prod(local) or block.size == 0
        assert block.padding >= 0
    assert sorted(seen) == list(range(sharding.mesh.size))


def _oracle_cells(sharding, shape, key) -> dict[tuple[int, int], str]:
    """(row, col) -> device label, computed from Sharding.shard_index device by device."""
    ndim = len(shape)
    cells: dict[tuple[int, int], list[int]] = {}
    for device in range(sharding.mesh.size):
        index = [sharding.shard_index(device, d) for d in range(ndim)]
        if tuple(index[: len(key)]) != key:
            continue
        row = index[-2] if ndim >= 2 else 0
        cells.setdefault((row, index[-1]), []).append(device)
    return {rc: device_label(devs, limit=4) for rc, devs in cells.items()}


def _facet_keys(sharding, shape):
    lead = max(len(shape) - 2, 0)
    tiles = sharding.tiles(len(shape))
    return list(np.ndindex(*[min(t, MAX_FACETS) for t in tiles[:lead]]))


@given(sharded_shapes(max_devices=64))
def test_figure_draws_the_blocks_and_bytes_of_the_sharding(case):
    sharding, shape = case
    fig = layout_figure(sharding, shape, "float32")
    heatmaps = [t for t in fig.data if isinstance(t, go.Heatmap)]
    keys = _facet_keys(sharding, shape)
    assert len(heatmaps) == len(keys)
    local = sharding.shard_shape(shape)
    labels = [t for t in fig.data if t.name == "device labels"]
    for heat, key in zip(heatmaps, keys, strict=True):
        text = np.asarray(heat.text)
        drawn = {rc: text[rc] for rc in np.ndindex(*text.shape)}
        oracle = _oracle_cells(sharding, shape, tuple(int(i) for i in key))
        assert drawn == oracle
        if labels:  # printed labels: the same devices, one per block
            assert sorted(labels.pop(0).text) == sorted(oracle.values())
        assert list(heat.x) == [
            i * local[-1] for i in range(sharding.dim_shards(len(shape) - 1) + 1)
        ]
    assert labels == []
    bars = next(t for t in fig.data if isinstance(t, go.Bar))
    assert list(bars.y) == list(sharding.device_bytes(shape, np.float32).values())
    assert list(bars.x) == list(range(sharding.mesh.size))
    axis = fig.layout["xaxis" + bars.xaxis[1:]]
    labelled = range(axis.tick0, sharding.mesh.size, axis.dtick)
    if sharding.mesh.size <= 16:  # every device's bar is labelled, not every other one
        assert list(labelled) == list(bars.x)
    else:  # at most 16 labels, evenly spaced from device 0
        assert len(labelled) <= 16 and labelled[0] == 0


def test_device_labels_are_drawn_above_the_padding_hatching():
    s = gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x", "y"))
    names = [t.name for t in layout_figure(s, (7, 6)).data]
    assert "padding" in names
    assert names.index("device labels") > max(i for i, n in enumerate(names) if n == "padding")


def test_64_shards_get_64_distinct_colours():
    assert len(set(PALETTE)) == len(PALETTE) == 64
    s = gv.Sharding(gv.Mesh({"x": 8, "y": 8}), ("x", "y"))
    fig = layout_figure(s, (16, 16))
    bars = next(t for t in fig.data if isinstance(t, go.Bar))
    assert sorted(set(bars.marker.color)) == list(range(64))  # one colour number per shard
    heat = next(t for t in fig.data if isinstance(t, go.Heatmap))
    assert bars.marker.colorscale == heat.colorscale  # bars and blocks share the colours


def test_title_and_readable_subtitle():
    s = gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x", None))
    title = layout_figure(s, (7, 6)).layout.title
    assert title.text == "f32[7@x, 6] on Mesh(x=2, y=4)"
    assert "each device allocates f32[4,6] = 96 B" in title.subtitle.text
    assert title.subtitle.font.size >= 12


@given(sharded_shapes(max_devices=64, max_rank=2))
def test_padding_is_drawn_exactly_where_the_padded_shards_exceed_the_array(case):
    sharding, shape = case
    fig = layout_figure(sharding, shape)
    local, tiles = sharding.shard_shape(shape), sharding.tiles(len(shape))
    padded = [k * t for k, t in zip(local, tiles, strict=True)]
    rows = (shape[0], padded[0]) if len(shape) == 2 else (1, 1)
    area = 0.0
    for t in fig.data:
        if t.name == "padding":
            xs, ys = t.x, t.y
            area += (max(xs) - min(xs)) * (max(ys) - min(ys))
    assert area == padded[-1] * rows[1] - shape[-1] * rows[0]


def test_layout_text_lists_blocks_devices_bytes_and_padding():
    s = gv.Sharding(gv.Mesh({"x": 2, "y": 4}), ("x", None))
    assert layout_text(s, (7, 6)) == "\n".join(
        [
            "f32[7@x, 6] on Mesh(x=2, y=4): 2 shard(s) x 4 replica(s); "
            "each device allocates f32[4,6] = 96 B",
            "  block [0:4, 0:6]  on devices 0-3          96 B",
            "  block [4:7, 0:6]  on devices 4-7          72 B + 24 B padding",
        ]
    )


def test_four_d_on_4096_devices_draws_and_summarises():
    s = gv.Sharding(gv.Mesh({"x": 64, "y": 64}), (None, "y", None, "x"))
    shape = (2, 100, 3, 128)
    text = layout_text(s, shape, "bfloat16", max_lines=3).splitlines()
    assert text[0].startswith("bf16[2, 100@y, 3, 128@x] on Mesh(x=64, y=64): 4096 shard(s)")
    assert text[-1] == "  … 4093 more blocks"
    fig = layout_figure(s, shape, "bfloat16")
    assert len([t for t in fig.data if isinstance(t, go.Heatmap)]) == MAX_FACETS
    assert "+56 more blocks" in fig.layout.annotations[MAX_FACETS - 1].text
    assert len(fig.to_json()) < 2_000_000


def test_device_labels_are_compact():
    assert device_label([3, 1, 2, 0]) == "0-3"
    assert device_label([0, 2, 4, 6]) == "0,2,4,6"
    assert device_label(range(0, 64, 8)) == "0,8,16,24,32,…+3"
    assert device_label([5]) == "5"


@given(sharded_shapes(max_devices=64))
def test_unvalidated_figure_is_what_plotly_validation_would_make(case):
    """layout_figure skips plotly's property checks for speed: validating its output (every
    property name and value checked and coerced) must change nothing."""
    sharding, shape = case
    figure = layout_figure(sharding, shape, "int8")
    drawn = json.loads(figure.to_json())
    assert json.loads(go.Figure(figure.to_dict()).to_json()) == drawn
    again = json.loads(layout_figure(sharding, shape, "int8").to_json())
    assert again == drawn  # the cached subplot grid is copied, never changed
