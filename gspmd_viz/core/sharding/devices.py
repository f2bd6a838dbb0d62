"""How many simulated CPU devices this process has, and how to ask for more.

jax reads `jax_num_cpu_devices` once, when its backend starts. So the device count must be
chosen before the first jax computation, and a library must never choose it at import time.
"""

import jax
from jax._src import xla_bridge


class DeviceCountError(ValueError, RuntimeError):
    """The process has fewer jax devices than a mesh needs (fix: gv.use_cpu_devices first)."""


def _backend_started() -> bool:
    return xla_bridge.backends_are_initialized()


def use_cpu_devices(n: int) -> None:
    """Simulate `n` CPU devices in this process. Call before any jax computation."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"use_cpu_devices needs a positive whole number of devices, got {n!r}")
    if not _backend_started():
        jax.config.update("jax_num_cpu_devices", n)
        return
    have = jax.device_count()
    if have < n:
        raise DeviceCountError(
            f"jax already started with {have} device(s), so it cannot simulate {n}. "
            f"Call gv.use_cpu_devices({n}) before any jax computation "
            "(in a notebook: restart the kernel and run it in the first cell)."
        )


def require_devices(needed: int, purpose: str = "this") -> None:
    """The one device-count error: say what needs the devices and how to get them."""
    have = jax.device_count()
    if have < needed:
        raise DeviceCountError(
            f"{purpose} needs {needed} devices but this process has {have}. "
            f"Call gv.use_cpu_devices({needed}) before any jax computation "
            "(in a notebook: restart the kernel and run it in the first cell). "
            "Symbolic work (gv.propagate, gv.partition, spmd.collectives) needs no devices."
        )


def available_devices(needed: int) -> list:
    """The first `needed` of every jax device (all processes', CPU, GPU or TPU), ordered by
    (process index, device id): with several processes the major mesh axes cross processes
    (hosts) and the minor ones stay inside one. A clear error says how to get too few."""
    require_devices(needed)
    return sorted(jax.devices(), key=lambda d: (d.process_index, d.id))[:needed]


def has_devices(needed: int) -> bool:
    """True when the process can run on `needed` devices (starts jax's backend)."""
    return jax.device_count() >= needed
