"""The per-device program as data: instructions (loops and branches too), local lowering, the
kernels one device runs, reductions combined right away, and running it under shard_map."""
