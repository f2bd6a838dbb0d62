"""The pass: each equation's split (chosen in choice/) applied in program order, results
handed on, loops and branches partitioned once, and the whole plans compared."""
