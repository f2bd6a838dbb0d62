"""Collectives on a pod: topologies, chips, algorithms, the link-level simulator, closed forms."""
