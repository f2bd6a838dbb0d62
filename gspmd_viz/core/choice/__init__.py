"""One equation's split: the one propagation settled, cheaper ones weighed by cost on a chip,
gathering an FSDP weight against reducing the partial product, or XLA's own."""
