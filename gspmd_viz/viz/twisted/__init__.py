"""Twisted tori drawn: where a short axis's wraparound lands (``plane.plane_svg``)."""
