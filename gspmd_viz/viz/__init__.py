"""Figures and widgets that replay what core and sim recorded (one view per file).

`show(obj)` displays a plotly figure, a graphviz graph or a widget and leaves a static picture
of it in the cell's outputs, so a lesson reads without a kernel (see static.py).
"""

from gspmd_viz.viz.static import show

__all__ = ["show"]
