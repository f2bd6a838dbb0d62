"""What every widget does with an exception raised in a control's handler.

It becomes one line in the widget (never a traceback in JupyterLab's log console); the widget
greys the views that no longer match its controls and keeps working. A widget decorates its
handlers with ``inline_errors`` and has a ``fail(err)`` that shows ``error_html(err)``.
"""

from __future__ import annotations

import functools
import html


def error_line(err: Exception | str) -> str:
    """The first line of `err`, named by its type unless it is a ValueError (bad input)."""
    if isinstance(err, str):
        return err.splitlines()[0] if err else "error"
    text = str(err).splitlines()[0] if str(err) else ""
    if isinstance(err, ValueError) and text:
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def error_html(err: Exception | str) -> str:
    return f"<span class='gv-error' style='color:#b00020'>⚠ {html.escape(error_line(err))}</span>"


def inline_errors(handler):
    """Run a widget's handler; any exception goes to the widget's ``fail`` instead of escaping."""

    @functools.wraps(handler)
    def run(self, *args, **kwargs):
        try:
            return handler(self, *args, **kwargs)
        except Exception as err:  # noqa: BLE001 (any failure must stay inside the widget)
            self.fail(err)
            return None

    return run


STALE_STYLE = "opacity:0.3;filter:grayscale(1)"
# a widget whose views take the class gv-stale (add_class) shows this <style> among its children
STALE_CSS = f"<style>.gv-stale {{ {STALE_STYLE}; }}</style>"


def stale_html(picture: str) -> str:
    """The last good `picture`, greyed out and marked `gv-stale`: it no longer matches the
    controls (an error message above says why)."""
    return f"<div class='gv-stale' style='{STALE_STYLE}'>{picture}</div>"
