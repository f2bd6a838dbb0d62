"""Collectives on a torus replayed link by link: frames, heatmaps for big pods, one step's
replay, and time against payload."""
