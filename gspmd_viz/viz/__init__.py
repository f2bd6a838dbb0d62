"""Figures and widgets that replay what core and sim recorded (one view per file)."""
