"""Reference GSPMD: mesh, sharding, trace, propagate, partition, execute.

Read the modules top to bottom in this order; each imports only modules above it:
  mesh         devices mesh          simulated CPU devices; the logical mesh of named axes
  notations    hlo                   HloSharding text <-> a spec on a mesh
  sharding     sharding              per tensor dim, the mesh axes splitting it
  annotate     annotate              gv.mesh_split, the user's annotation
  program      values slice_of_pad builder program
                                     gv.trace: a jaxpr flattened into Values and Equations
                                     (the records, a slice of a pad traced as a pad of a
                                     slice, the jaxpr walk, the Program)
  registry     factors families families_indexed registry
                                     factor rules, the families that build them, and one
                                     entry per primitive (everything the passes know about it)
  propagate    propagation propagate the plain record, and the algorithm that fills it
  collectives  collective            a collective and its wire bytes
  halo         halo_rounds halo halo_exchange halo_ops halo_program block_moves
                                     permute rounds (packed by distance or by source), halo
                                     arithmetic, the per-device exchange, windowed ops per
                                     dim, whole spatially split conv nets, and rolls and
                                     flips that move whole blocks
  reshard      permutes moves reshard
                                     who sends which block to whom where each new block
                                     lies in an old one (in rounds); the single steps
                                     between shardings; the cheapest plan
  execute      spmd spmd_regions lower kernels reduce_combine split_cost staging
               plan_record recompute processes execute
                                     per-device instructions (loops and branches apart) as
                                     data and text, local lowering, the kernels one device
                                     runs, reductions combined right away (max, argmax), what
                                     a split and a plan cost beyond bytes (work done twice,
                                     FLOPs, time on a chip, memory: what collectives stage,
                                     the buffers each instruction reads) and the plan's
                                     record, a checkpoint's
                                     recomputation kept apart, and running
                                     instructions from a table
  partition    split follow lookahead remake regions partition whole_plan
                                     choosing each equation's split; the split XLA takes
                                     (the follow plan's); what handing its
                                     results on costs, one reader ahead; values made from
                                     scalars made again where needed; loops partitioned
                                     once into a per-device loop; the pass itself; its
                                     greedy plan against following propagation everywhere
  programs     pipeline pipeline_gspmd training
                                     built on the above: pipeline schedules run under
                                     shard_map; GSPMD's pipelining as an annotated program;
                                     weight-update sharding by annotations alone
Execute comes before partition because partition returns the runnable SPMDProgram.

Module order: devices mesh hlo sharding annotate values slice_of_pad builder program factors
families families_indexed registry propagation propagate collective halo_rounds halo
halo_exchange halo_ops halo_program block_moves permutes moves reshard spmd spmd_regions lower
kernels reduce_combine split_cost staging plan_record recompute processes execute split follow
lookahead remake regions partition whole_plan pipeline pipeline_gspmd training
"""
