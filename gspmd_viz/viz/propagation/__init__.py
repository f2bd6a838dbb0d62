"""Sharding propagation replayed step by step on the program graph, beside XLA's."""
