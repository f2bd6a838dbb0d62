"""`gv.weight_update_sharding`: shard a data-parallel optimizer update by annotations alone.

Data parallelism repeats the weight update on every replica: each one all-reduces the
gradients and runs the optimizer on the whole of every weight. Weight-update sharding
(Xu et al., arXiv 2004.13336) splits that work over the replicas instead:

    grads  [P]{sum over data} -> reduce-scatter(data) -> [P/data]    (was: all-reduce -> [P])
    slots  [P/data]             update on the shard                  (was: [P] on every replica)
    params [P/data]           -> all-gather(data)     -> [P]         (ready for the next forward)

A ring all-reduce is a reduce-scatter followed by an all-gather, so the bytes on the wire are
the same; the optimizer's FLOPs and its slots' memory drop to 1/N.

The transform adds no collective itself. It pins the optimizer state to a sharding split over
`axis` (on top of whatever model sharding propagation gives it) and pins the new parameters
to the sharding they came in with; propagation carries the split onto the gradients and the
update, and the partitioner turns the pending gradient sums into reduce-scatters because their
consumer wants them split. # XLA: the paper's pass rewrites the graph (all-reduce ->
reduce-scatter + dynamic-slice + all-gather); GSPMD gets the same result from sharding
annotations on the optimizer variables, which is what we do.
"""

from __future__ import annotations

import functools

import jax

from gspmd_viz.core.program.trace import trace
from gspmd_viz.core.propagation.algorithm import propagate
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.mesh_split import mesh_split
from gspmd_viz.core.sharding.sharding import Sharding


def with_axis(sharding: Sharding, shape, axis: str) -> Sharding:
    """`sharding` with `axis` added (minor) to the largest dim whose shard it divides.

    [32, 64@y] + data(8) -> [32@data, 64@y]. Unchanged when `axis` already splits a dim, or when
    no dim's shard divides evenly (a scalar step count, an odd-sized bias): that leaf stays
    whole on every replica of `axis`, as in plain data parallelism.
    """
    if axis in sharding.tiled_axes:
        return sharding
    n = sharding.mesh.axis_size(axis)
    local = sharding.shard_shape(shape)
    fits = [d for d, size in enumerate(local) if size % n == 0 and size >= n]
    if not fits:
        return sharding
    dim = max(fits, key=lambda d: (local[d], -d))
    spec = [sharding.dim_axes(d) for d in range(len(shape))]
    spec[dim] = spec[dim] + (axis,)
    return Sharding(sharding.mesh, spec)


def _shape_of(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


class WeightUpdateSharded:
    """A train step `(params, opt_state, batch) -> (params, opt_state, loss)` whose optimizer
    update runs sharded over one mesh axis. Call it like the step it wraps.

    A weight the model annotates itself without `axis` (2-D sharding with weights on the model
    axis only) pins its gradient too: a sharding constraint transposes to the same constraint on
    the cotangent. That gradient is then all-reduced over `axis` and sliced for the update, and
    the new weight all-gathered: more bytes than plain DP. Split such weights over `axis` as
    well (GSPMD's 2-D transformer: `wi = [x, y]`) and the reduce-scatter comes back.
    """

    def __init__(self, train_step, mesh: Mesh, axis: str):
        if not callable(train_step):
            raise TypeError(
                f"weight_update_sharding needs a train step function, got {train_step!r}"
            )
        if not isinstance(mesh, Mesh):
            raise TypeError(f"weight_update_sharding needs a gv.Mesh, got {type(mesh).__name__}")
        mesh.check_axis(axis)
        self.train_step, self.mesh, self.axis = train_step, mesh, axis
        functools.update_wrapper(self, train_step)
        self._cache: dict = {}  # (tree structure, shapes) -> the shardings to pin

    def shardings(self, params, opt_state, batch) -> tuple:
        """(param shardings, optimizer-state shardings) the step pins, as pytrees like its args.

        Parameters keep the sharding propagation gives the plain step (replicated under pure
        data parallelism, the model split under 2-D sharding); every optimizer-state leaf gets
        that sharding plus `axis` on a dim that divides (see `with_axis`).
        """
        shapes = jax.tree.map(_shape_of, (params, opt_state, batch))
        return self._shardings(shapes)

    def _shardings(self, shapes) -> tuple:
        treedef = jax.tree.structure(shapes)
        leaves = jax.tree.leaves(shapes)
        key = (treedef, tuple((x.shape, str(x.dtype)) for x in leaves))
        if key not in self._cache:
            self._cache[key] = self._propagated(shapes)
        return self._cache[key]

    def _propagated(self, shapes) -> tuple:
        program = trace(self.train_step, *shapes)
        if program.mesh is not None and program.mesh != self.mesh:
            raise ValueError(
                f"the train step annotates on {program.mesh!r}, but weight_update_sharding was "
                f"given {self.mesh!r}: pass the mesh the step's mesh_split calls use"
            )
        n_params = len(jax.tree.leaves(shapes[0]))
        n_state = len(jax.tree.leaves(shapes[1]))
        if program.mesh is None:
            found = [Sharding(self.mesh, ()) for _ in program.inputs]
        else:
            found = list(propagate(program).inputs)
        params = found[:n_params]
        state = [
            with_axis(s, x.shape, self.axis)
            for s, x in zip(
                found[n_params : n_params + n_state], jax.tree.leaves(shapes[1]), strict=True
            )
        ]
        return (
            jax.tree.unflatten(jax.tree.structure(shapes[0]), params),
            jax.tree.unflatten(jax.tree.structure(shapes[1]), state),
        )

    def _pin(self, tree, shardings):
        return jax.tree.map(lambda x, s: mesh_split(x, self.mesh, s), tree, shardings)

    def __call__(self, params, opt_state, batch):
        param_s, state_s = self.shardings(params, opt_state, batch)
        params, opt_state = self._pin(params, param_s), self._pin(opt_state, state_s)
        new_params, new_state, loss = self.train_step(params, opt_state, batch)
        # [P/axis] -> all-gather(axis) -> [P]: replicated again for the next forward
        return self._pin(new_params, param_s), self._pin(new_state, state_s), loss

    def __repr__(self) -> str:
        name = getattr(self.train_step, "__name__", "train_step")
        return f"weight_update_sharding({name}, {self.mesh!r}, {self.axis!r})"


def weight_update_sharding(train_step, mesh: Mesh, axis: str) -> WeightUpdateSharded:
    """`train_step` with its optimizer update sharded over mesh axis `axis` (same signature).

    `train_step(params, opt_state, batch) -> (params, opt_state, loss)`; the first argument and
    result are the parameters, the second the optimizer state. Only the batch needs annotating.
    """
    return WeightUpdateSharded(train_step, mesh, axis)
