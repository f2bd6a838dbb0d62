"""Reference GSPMD: mesh, sharding, trace, propagate, partition, halo, pipeline."""
