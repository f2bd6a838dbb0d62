"""Figures and widgets that replay what core and sim recorded: one folder per view (arrays,
propagation, ledger, halo, torus, twisted, pipeline, training, explain), what they share in common/,
and export.py, which writes every lesson as an offline page.

`show(obj)` displays a plotly figure, a graphviz graph or a widget and leaves a static picture
of it in the cell's outputs, so a lesson reads without a kernel (see common/static.py).
"""

from gspmd_viz.viz.common.static import show

__all__ = ["show"]
