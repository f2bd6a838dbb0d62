"""Annotate a few tensors, infer the rest: the record of steps and priorities, and the
algorithm that fills it."""
