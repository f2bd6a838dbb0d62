"""Reference GSPMD: one folder per phase, in the order a program goes through them.

  sharding/     where a tensor lives: devices, mesh, Sharding, HloSharding text, mesh_split
  program/      what is partitioned: gv.trace turns a jaxpr into Values and Equations
  rules/        what each primitive says about its dims: one factor rule per primitive
  propagation/  annotate a few tensors, infer the rest
  reshard/      move a tensor from one sharding to another with collectives
  halo/         windowed ops (convolutions, pooling) on split spatial dims
  spmd/         the per-device program as data, and running it under jax.shard_map
  cost/         what a split and a plan cost: FLOPs, bytes, time on a chip, memory
  choice/       one equation's split: propagation's, cheaper ones by cost, XLA's; gather or reduce
  partition/    the pass: each equation's split, loops and branches, the whole plan

Read first, in this order (each adds one idea):
  1. sharding/mesh.py            a logical mesh of named axes
  2. sharding/sharding.py        per tensor dim, the mesh axes splitting it
  3. sharding/mesh_split.py      the user's annotation
  4. program/trace.py            a jaxpr flattened into Values and Equations
  5. rules/factors.py            einsum-like factor rules ("b i k, b k j -> b i j")
  6. rules/registry.py           one entry per primitive
  7. propagation/algorithm.py    propagation by factor, priority by priority
  8. reshard/steps.py            all-gather, all-to-all, slice, permute between two shardings
  9. spmd/instructions.py        the per-device program as data, printed as text
 10. partition/partitioner.py    the pass that writes it
Then halo/ (windowed ops) and spmd/run.py (running it). Beyond GSPMD, later reading: cost/ and
choice/ and partition/{lookahead,whole_plan}.py choose among plans by cost on a chip (GSPMD takes
propagation's split everywhere; choice/follow_xla.py does that too).

Each module imports only modules listed before it here (tests/test_core_layout.py checks):

Module order:
  sharding.devices sharding.mesh sharding.hlo_text sharding.sharding sharding.mesh_split
  sharding.collective
  program.records program.slice_of_pad program.split_as_slices program.jaxpr_walk program.trace
  rules.factors rules.families rules.families_pieces rules.gather_scatter rules.registry
  propagation.record propagation.algorithm
  reshard.permute_rounds reshard.steps reshard.planner
  halo.rounds halo.arithmetic halo.exchange halo.windowed_ops halo.block_moves
  spmd.instructions spmd.loops_branches spmd.local_ops spmd.local_kernels spmd.reshard_kernels
  spmd.reduce_combine spmd.checkpoint_barriers spmd.processes spmd.run
  cost.split_cost cost.staged_bytes cost.plan_cost
  choice.choose_split choice.gather_or_reduce choice.follow_xla
  partition.partitioner_state partition.lookahead
  partition.remake_scalars partition.twins partition.control_flow partition.partitioner
  partition.whole_plan
"""
