"""Halo exchange replayed round by round on split images."""
