"""A whole training step on a pod: its collectives link by link, memory and step time."""
