"""Parallelism built on the reference GSPMD: pipeline schedules run under shard_map, GSPMD's
own pipelining as an annotated program, and weight-update sharding by annotations alone."""
