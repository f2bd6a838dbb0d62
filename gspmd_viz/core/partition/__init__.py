"""The pass: choosing each equation's split (or following XLA's), handing results on,
loops and branches partitioned once, and the whole plans compared."""
