"""Play buttons that agree with the frame on screen.

ipywidgets' Play pauses itself one interval after its last frame (its next tick finds no frame
to show), so for that interval, 0.9 s in the halo widget, the button showed "pause" over a
finished animation. `pause_at_end` stops it from the kernel as soon as the last frame is shown.
"""

from __future__ import annotations

import ipywidgets as widgets


def pause_at_end(play: widgets.Play, shown: widgets.ValueWidget) -> None:
    """Pause `play` when `shown` (the slider jslinked to it) reaches play.max, unless it repeats."""

    def stop(change) -> None:
        if play.playing and not play.repeat and change["new"] >= play.max:
            play.playing = False

    shown.observe(stop, "value")
