"""Moving a tensor from one sharding to another: who sends which block in permute rounds, the
single collective steps, and the cheapest plan of steps."""
