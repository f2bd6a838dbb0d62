"""What is partitioned: the IR records (values, equations, loops, branches), the jaxpr walk
that builds them, and gv.trace with its reference interpreter."""
