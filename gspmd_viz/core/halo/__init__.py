"""Windowed ops on split spatial dims: halo arithmetic per shard, permute rounds, the
exchange, windowed ops per dim, and rolls and flips that move whole blocks."""
