"""Several processes (jax.distributed, one per host): the global arrays a runner hands to jit.

In one process a runner takes numpy or jax arrays as they are. With several, every process runs
the same script and holds the same whole inputs; each builds a global jax.Array of which it
places only its own devices' slices (jax.make_array_from_callback), and a runner returns its
outputs replicated on every device, so that every process can read them (np.asarray).
"""

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec


def several_processes() -> bool:
    """True when jax.distributed joined this process to others (their devices are global)."""
    return jax.process_count() > 1


def check_this_process_in(jmesh) -> None:
    """Every process runs the program, so each must own some of the mesh's devices."""
    if not any(d.process_index == jax.process_index() for d in jmesh.devices.flat):
        raise ValueError(
            f"the mesh uses {jmesh.devices.size} of the {jax.device_count()} devices and process "
            f"{jax.process_index()} owns none of them: with several processes, make the mesh "
            f"span every process's devices (all {jax.device_count()} of them)"
        )


def global_array(x, spec: PartitionSpec, jmesh):
    """`x` (the whole value, the same in every process) as a global jax.Array split by `spec`
    over `jmesh`: each process copies in only its own devices' slices."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return x  # already global (an output of an earlier step)
    data = np.asarray(x)
    sharding = NamedSharding(jmesh, spec)
    return jax.make_array_from_callback(data.shape, sharding, lambda index: data[index])


def readable_everywhere(jmesh) -> dict:
    """jax.jit options whose outputs every process can read: replicated over all devices with
    several processes; nothing (the compiler's choice) in one."""
    return {"out_shardings": NamedSharding(jmesh, PartitionSpec())} if several_processes() else {}
