"""A training step's memory and step time on a pod, by strategy."""
