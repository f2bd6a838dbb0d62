"""`mesh_split`: a sharding annotation inside ordinary jax code.

It is `jax.lax.with_sharding_constraint` underneath, so the same function runs under `jax.jit`
with a real constraint, and `gv.trace` reads it back from the jaxpr as a fixed sharding.
"""

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from gspmd_viz.core.sharding.devices import has_devices, require_devices
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding


def as_sharding(mesh: Mesh, spec) -> Sharding:
    return spec if isinstance(spec, Sharding) else Sharding(mesh, spec)


def mesh_split(x, mesh: Mesh, spec):
    """Annotate `x` with `spec` on `mesh` (GSPMD's mesh_split).  # XLA: a Sharding custom-call"""
    sharding = as_sharding(mesh, spec)
    if sharding.mesh != mesh:
        raise ValueError(f"{sharding!r} is on another mesh than {mesh!r}")
    sharding.check_rank(np.ndim(x))
    # jit ignores a constraint on an AbstractMesh, so use real devices whenever we have them.
    if not has_devices(mesh.size) and not isinstance(x, jax.core.Tracer):
        require_devices(mesh.size, f"mesh_split outside a traced function on {mesh!r}")
    target = mesh.to_jax() if has_devices(mesh.size) else mesh.to_abstract()
    return jax.lax.with_sharding_constraint(x, NamedSharding(target, sharding.to_partition_spec()))


def read_annotation(named: NamedSharding) -> tuple[Sharding, frozenset[int]]:
    """A traced constraint's sharding, and the dims it leaves open (P.UNCONSTRAINED: jax.vmap
    adds it for the mapped dim; it means "propagation decides", not "replicated")."""
    entries = [None if a is PartitionSpec.UNCONSTRAINED else a for a in named.spec]
    spec = PartitionSpec(*entries, unreduced=named.spec.unreduced)
    open_dims = {d for d, a in enumerate(named.spec) if a is PartitionSpec.UNCONSTRAINED}
    return Sharding.from_partition_spec(Mesh.from_jax(named.mesh), spec), frozenset(open_dims)
