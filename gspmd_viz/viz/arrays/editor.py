"""Sharding editor: pick a mesh, a tensor shape and the mesh axes of each tensor dim.

It shows the layout figure, the sharding in three notations (PartitionSpec, GSPMD dims_mapping,
HloSharding text) and the jax code that builds it. A learner can paste HloSharding text (from an
XLA dump or warning) to see it. Bad input shows an inline message; the widget keeps working.
User text is parsed, never evaluated.
"""

import html
from itertools import permutations

import ipywidgets as widgets
import plotly.graph_objects as go

from gspmd_viz.core.sharding.hlo_text import parse_tile_assignment
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.viz.arrays.blocks import layout_text
from gspmd_viz.viz.arrays.layout import layout_dict
from gspmd_viz.viz.arrays.notation import (
    dims_mapping_text,
    gv_code,
    jax_code,
    parse_mesh,
    parse_tensor_shape,
    pspec_text,
)
from gspmd_viz.viz.common.inline import STALE_CSS, error_html, error_line, inline_errors
from gspmd_viz.viz.common.plotly_view import PlotlyView, plain

DTYPES = ("float32", "bfloat16", "float16", "int8", "int32", "float64")
MAX_AXES_PER_DIM = 3
# The figure of the last good state stays on screen, greyed out, while the input is bad.


def axis_options(axis_names) -> list[tuple[str, object]]:
    """Dropdown choices for one tensor dim: none, one axis, or an ordered tuple (major first)."""
    options: list[tuple[str, object]] = [("— (not split)", None)]
    for k in range(1, min(MAX_AXES_PER_DIM, len(axis_names)) + 1):
        for axes in permutations(axis_names, k):
            options.append((axes[0], axes[0]) if k == 1 else (" then ".join(axes), axes))
    return options


class ShardingEditor(widgets.VBox):
    """`ShardingEditor(mesh="x=2, y=4", shape="8, 6", spec=("x", None))`; display it."""

    def __init__(self, mesh="x=2, y=4", shape="8, 6", spec=("x",), dtype="float32"):
        self.mesh_text = _text("mesh axes", mesh, "x=2, y=4")
        self.shape_text = _text("tensor shape", shape, "8, 6")
        self.dtype = widgets.Dropdown(options=DTYPES, value=dtype, description="dtype")
        self.hlo_text = _text(
            "HloSharding", "", "paste e.g. {devices=[2,1,4]<=[8] last_tile_dim_replicate}"
        )
        self.hlo_text.layout = widgets.Layout(width="95%")
        self.dims_box = widgets.HBox()
        self.message = widgets.HTML()
        self.notation = widgets.HTML()
        self.plot = PlotlyView()
        self.plot.add_class("gv-layout-plot")
        self.dims: list[widgets.Dropdown] = []
        self.mesh = self.shape = self.sharding = self.figure = None
        self.error = ""
        self._quiet = False
        super().__init__(
            [
                widgets.HBox([self.mesh_text, self.shape_text, self.dtype]),
                self.dims_box,
                self.hlo_text,
                self.message,
                self.notation,
                self.plot,
                widgets.HTML(STALE_CSS),
            ]
        )
        self.add_class("gv-sharding-editor")
        for w in (self.mesh_text, self.shape_text):
            w.observe(self._on_structure, names="value")
        self.dtype.observe(self._on_dim, names="value")
        self.hlo_text.observe(self._on_hlo, names="value")
        self._on_structure()
        self.set_spec(spec)

    # --- actions a learner (or a test) takes ----------------------------------------------
    @inline_errors
    def set_spec(self, spec) -> None:
        """Select these mesh axes per tensor dim (None, an axis, or a tuple of axes)."""
        entries = list(spec) + [None] * (len(self.dims) - len(spec))
        if len(entries) > len(self.dims):
            self.fail(f"spec {spec!r} has more entries than the tensor's rank {len(self.dims)}")
            return
        values = [_choice(entry) for entry in entries]
        for dd, entry, value in zip(self.dims, entries, values, strict=True):
            if value not in [v for _, v in dd.options]:  # check all before changing any
                self.fail(f"{entry!r} is not a choice for {dd.description}")
                return
        self._quiet = True
        try:
            for dd, value in zip(self.dims, values, strict=True):
                dd.value = value
        finally:
            self._quiet = False
        self.refresh()

    @inline_errors
    def load_hlo(self, text: str) -> None:
        """Show the layout that an HloSharding string describes on the current mesh."""
        text = text.strip()
        if not text or self.mesh is None:
            return
        try:
            tiles = parse_tile_assignment(text)
            if tiles is not None and tiles.ndim - 1 != len(self.shape):
                raise ValueError(
                    f"{text} is for a tensor of rank {tiles.ndim - 1} but the shape "
                    f"{self.shape} has rank {len(self.shape)}: change the shape first"
                )
            sharding = Sharding.from_hlo(self.mesh, text)
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        self.set_spec(sharding.spec)
        if not self.error:
            self.message.value = (
                f"<span class='gv-ok'>read {html.escape(text)} as {pspec_text(sharding)}</span>"
            )

    def notations(self, sharding: Sharding | None = None, shape=None) -> dict[str, str]:
        """The sharding (default: the one drawn) as text in each notation."""
        s, shape = sharding or self.sharding, shape or self.shape
        if s is None:
            return {}
        ndim = len(shape)
        return {
            "type": s.describe(shape, self.dtype.value),
            "PartitionSpec": pspec_text(s),
            "dims_mapping": dims_mapping_text(s, ndim),
            "HloSharding": s.to_hlo(ndim),
            "jax": jax_code(s, shape, self.dtype.value),
            "gspmd_viz": gv_code(s, shape, self.dtype.value),
            "layout": layout_text(s, shape, self.dtype.value),
        }

    # --- reactions ----------------------------------------------------------------------
    def _on_hlo(self, change) -> None:
        if not self._quiet:
            self.load_hlo(change["new"])

    @inline_errors
    def _on_structure(self, change=None) -> None:
        try:
            mesh, shape = (
                parse_mesh(self.mesh_text.value),
                parse_tensor_shape(self.shape_text.value),
            )
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        self._build_dims(mesh, shape, [dd.value for dd in self.dims])
        self.refresh()

    def _build_dims(self, mesh, shape, old) -> None:
        options = axis_options(mesh.axis_names)
        if len(shape) == len(self.dims) and all(dd.options == tuple(options) for dd in self.dims):
            for d, (dd, n) in enumerate(zip(self.dims, shape, strict=True)):
                dd.description = f"dim {d} ({n})"  # same choices: keep the dropdowns
            return
        values = [v for _, v in options]
        self.dims = []
        for d, n in enumerate(shape):
            dd = widgets.Dropdown(options=options, description=f"dim {d} ({n})")
            dd.layout = widgets.Layout(width="auto")
            dd.add_class(f"gv-dim-{d}")
            if d < len(old) and old[d] in values:
                dd.value = old[d]
            dd.observe(self._on_dim, names="value")
            self.dims.append(dd)
        self.dims_box.children = self.dims

    def _on_dim(self, change=None) -> None:
        if not self._quiet:
            self.refresh()

    @inline_errors
    def refresh(self) -> None:
        """Read every control, then redraw everything, or keep the last good drawing greyed."""
        try:
            mesh, shape = (
                parse_mesh(self.mesh_text.value),
                parse_tensor_shape(self.shape_text.value),
            )
            sharding = Sharding(mesh, tuple(dd.value for dd in self.dims))
            sharding.check_rank(len(shape))
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        self._render(sharding, shape)
        self.mesh, self.shape, self.sharding, self.error = mesh, shape, sharding, ""
        self.message.value = ""
        for view in (self.plot, self.notation):
            view.remove_class("gv-stale")
        self._quiet = True
        try:  # the HloSharding box always spells what is drawn
            self.hlo_text.value = sharding.to_hlo(len(shape))
        finally:
            self._quiet = False

    def fail(self, error: Exception | str) -> None:
        self.error = error_line(error)
        self.message.value = error_html(error)
        for view in (self.plot, self.notation):
            view.add_class("gv-stale")  # the last good state, greyed: not what the controls say

    def _render(self, sharding: Sharding, shape) -> None:
        """Compute every view of `sharding` first, then show them (all or nothing)."""
        n = self.notations(sharding, shape)
        spec = layout_dict(sharding, shape, self.dtype.value)
        rows = "".join(
            f"<tr><th style='text-align:left;padding-right:1em'>{k}</th>"
            f"<td><code>{html.escape(n[k])}</code></td></tr>"
            for k in ("type", "PartitionSpec", "dims_mapping", "HloSharding")
        )
        code = "".join(
            f"<details><summary>{title}</summary><pre>{html.escape(n[key])}</pre></details>"
            for title, key in (
                ("jax code", "jax"),
                ("gspmd_viz code", "gspmd_viz"),
                ("layout as text", "layout"),
            )
        )
        self.notation.value = f"<table class='gv-notations'>{rows}</table>{code}"
        self.figure = go.Figure(spec, _validate=False)
        self.plot.show(plain(spec))

    def static_figure(self):
        """What `gspmd_viz.viz.common.static.show` saves for readers without a kernel."""
        return self.figure


def _text(description: str, value: str, placeholder: str) -> widgets.Text:
    return widgets.Text(
        value=value,
        placeholder=placeholder,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


def _choice(entry):
    """A spec entry as a dropdown value: None, "x", or ("x", "y")."""
    if isinstance(entry, (tuple, list)):
        return None if not entry else entry[0] if len(entry) == 1 else tuple(entry)
    return entry
