"""Reference GSPMD: mesh, sharding, trace, propagate, partition, execute.

Read the modules top to bottom in this order; each imports only modules above it:
  mesh         devices mesh          simulated CPU devices; the logical mesh of named axes
  notations    hlo                   HloSharding text <-> a spec on a mesh
  sharding     sharding              per tensor dim, the mesh axes splitting it
  annotate     annotate              gv.mesh_split, the user's annotation
  program      program               gv.trace: a jaxpr flattened into Values and Equations
  registry     factors families registry
                                     factor rules, the families that build them, and one
                                     entry per primitive (everything the passes know about it)
  propagate    propagation propagate the plain record, and the algorithm that fills it
  collectives  collective            a collective and its wire bytes
  reshard      moves reshard         the single steps between shardings; the cheapest plan
  execute      spmd lower kernels combine execute
                                     per-device instructions as data and text, local
                                     lowering, the kernels one device runs, all-gather
                                     combining, and running instructions from a table
  cost         cost                  time on a chip (given as numbers) and the plan's record
  partition    split partition       choosing each equation's split; the pass itself
Execute comes before partition because partition returns the runnable SPMDProgram.

Module order: devices mesh hlo sharding annotate program factors families registry
propagation propagate collective moves reshard spmd lower kernels combine execute cost split
partition
"""
