"""Draw a collective's steps against time, one row per piece of its payload (sim.in_flight).

``pieces_svg({"lockstep": tl1, "4 pieces": tl4})`` draws one panel per timeline on a shared time
axis. Each step of each piece is a bar in three parts: waiting for its busiest link (grey),
sending its bytes there (its phase's colour), and in flight over its hops (the same colour,
pale), with the first timeline's phases named under the axis. In lockstep the bars follow one
another; in pieces one piece's flight overlaps the next piece's sending.
"""

from __future__ import annotations

import html

from gspmd_viz.sim import Timeline

LEFT, RIGHT, TOP, ROW, GAP, WIDTH = 110, 20, 34, 22, 30, 760
PHASE_COLOURS = ("#2171b5", "#e6550d", "#31a354", "#756bb1")
WAIT = "#bdbdbd"


def _parts(record, chip) -> list[tuple[float, str, float]]:
    """(start s, colour, seconds) of a step's wait, send and flight on its busiest link."""
    flight = record.max_hops * chip.hop_latency_s
    send = record.max_link_bytes / chip.ici_link_bandwidth_Bps
    wait = record.time_s - flight - send
    wait = wait if wait > 1e-9 * record.time_s else 0.0  # rounding, not a queue
    colour = PHASE_COLOURS[record.phase % len(PHASE_COLOURS)]
    t = record.start_s
    return [(t, WAIT, wait), (t + wait, colour, send), (t + wait + send, colour + "55", flight)]


def _panel(label, tl, y, scale) -> list[str]:
    out = [f'<text x="8" y="{y - 6}" font-size="13" font-weight="bold">{html.escape(label)}'
           f' ({tl.time_s * 1e6:.1f} µs)</text>']  # fmt: skip
    for piece in range(tl.pieces):
        row_y = y + ROW * piece
        out.append(f'<text x="{LEFT - 8}" y="{row_y + ROW / 2 + 4}" font-size="11" '
                   f'text-anchor="end">piece {piece}</text>')  # fmt: skip
    for r in tl.steps:
        row_y = y + ROW * r.piece + 3
        for start, colour, seconds in _parts(r, tl.chip):
            if seconds > 0:
                out.append(f'<rect x="{LEFT + start * scale:.2f}" y="{row_y}" '
                           f'width="{seconds * scale:.2f}" height="{ROW - 6}" fill="{colour}" '
                           f'stroke="white" stroke-width="0.5"/>')  # fmt: skip
    return out


def _axis(end_s, y, scale) -> list[str]:
    step_us = next(s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if end_s * 1e6 / s <= 12)
    out = [f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + end_s * scale:.2f}" y2="{y}" stroke="#333"/>']
    for k in range(int(end_s * 1e6 // step_us) + 1):
        x = LEFT + k * step_us * 1e-6 * scale
        out.append(f'<line x1="{x:.2f}" y1="{y}" x2="{x:.2f}" y2="{y + 4}" stroke="#333"/>'
                   f'<text x="{x:.2f}" y="{y + 16}" font-size="10" text-anchor="middle">'
                   f'{k * step_us}</text>')  # fmt: skip
    out.append(
        f'<text x="{LEFT}" y="{y + 30}" font-size="11">µs; grey: waiting for the link, '
        "solid: sending on the busiest link, pale: in flight over the hops</text>"
    )
    return out


def _legend(phases, y) -> list[str]:
    out = []
    for k, name in enumerate(phases):
        colour = PHASE_COLOURS[k % len(PHASE_COLOURS)]
        out.append(f'<rect x="{LEFT}" y="{y + 16 * k}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{LEFT + 16}" y="{y + 16 * k + 9}" font-size="11">'
                   f"{html.escape(name)}</text>")  # fmt: skip
    return out


def pieces_svg(timelines: dict[str, Timeline]) -> str:
    """One panel per timeline (label: timeline), one row per piece, on one time axis."""
    if not timelines:
        raise ValueError("pieces_svg needs at least one timeline, e.g. {'lockstep': tl}")
    end = max(tl.time_s for tl in timelines.values()) or 1.0
    scale = (WIDTH - LEFT - RIGHT) / end  # pixels per second
    rows, y = [], TOP
    for label, tl in timelines.items():
        rows += _panel(label, tl, y, scale)
        y += ROW * tl.pieces + GAP
    rows += _axis(end, y - GAP + 6, scale)
    phases = [p.name for p in next(iter(timelines.values())).phases]
    rows += _legend(phases, y - GAP + 44)
    height = y - GAP + 48 + 16 * len(phases)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'font-family="sans-serif">{"".join(rows)}</svg>')  # fmt: skip
