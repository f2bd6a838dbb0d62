"""A static SVG of a pipeline timeline, for lessons read without a kernel (and the README).

Same data as the plotly Gantt: one row per stage, one rectangle per action coloured by
microbatch (B drawn lighter, W lighter still), the grey between them is the bubble.
"""

from __future__ import annotations

import html

from gspmd_viz import pipeline as pipe
from gspmd_viz.viz.pipeline.gantt import SHADE, microbatch_colours

_ROW, _LEFT, _WIDTH = 26, 64, 720


def gantt_svg(tl: pipe.PipelineTimeline, caption: str = "") -> str:
    """The whole timeline as an <svg> string (deterministic: nbval compares it)."""
    s = tl.schedule
    scale = _WIDTH / tl.makespan
    colours = microbatch_colours(s.microbatches)
    height = s.stages * _ROW + 44
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_LEFT + _WIDTH + 10}" '
             f'height="{height}" font-family="sans-serif" font-size="11">']  # fmt: skip
    for i in range(s.stages):
        y = 20 + i * _ROW
        parts.append(f'<text x="4" y="{y + 16}">stage {i}</text>')
        parts.append(f'<rect x="{_LEFT}" y="{y}" width="{_WIDTH}" height="{_ROW - 4}" '
                     f'fill="#e6e6e6"/>')  # fmt: skip
    for i, (st, k, m) in enumerate(zip(s.stage, s.kind, s.microbatch, strict=True)):
        x, w = _LEFT + tl.start[i] * scale, (tl.end[i] - tl.start[i]) * scale
        kind = s.kind_names[k]
        parts.append(
            f'<rect x="{x:.1f}" y="{20 + st * _ROW}" width="{w:.1f}" height="{_ROW - 4}" '
            f'fill="{colours[m]}" fill-opacity="{SHADE[kind]}" stroke="white" '
            f'stroke-width="0.5"><title>{kind}{m}</title></rect>'
        )
    text = caption or (f"{s.name}, S={s.stages}, M={s.microbatches}, V={s.virtual}: bubble "
                       f"{tl.bubble_fraction:.1%} (grey); B lighter, W lightest")  # fmt: skip
    parts.append(f'<text x="{_LEFT}" y="12">{html.escape(text)}</text></svg>')
    return "".join(parts)
