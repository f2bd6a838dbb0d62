"""Where a tensor lives: simulated devices, the logical mesh, a sharding per tensor dim,
HloSharding text, the user's mesh_split annotation, and the Collective record."""
