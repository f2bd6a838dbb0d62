"""`gv.explain(fn, *args, mesh=...)`: every collective XLA puts in your compiled program, on the
line of your function that caused it, with its bytes, its time on a chip and the reason, next
to what the reference partitioner does at the same place; plus findings beyond collectives.

Read in order: frames (stack_frame_id -> file:line), source (which line is yours), compiled
(XLA's module, its collectives, the compiler's stderr), reference (our shardings and
collectives at an equation), findings, report (the records and their text), join (all of it).
"""

from gspmd_viz.explain.join import explain
from gspmd_viz.explain.report import FINDING_KINDS, Entry, Finding, Report

__all__ = ["FINDING_KINDS", "Entry", "Finding", "Report", "explain"]
