"""Parsing the editor's text fields and printing a sharding in every notation (no eval)."""

import re

from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding, spec_entry

_MESH_ITEM = re.compile(r"\s*([A-Za-z_]\w*)\s*[=:]\s*(-?\d+)\s*")


def parse_mesh(text: str) -> Mesh:
    """`x=2, y=4` (or `x:2 y:4`) -> Mesh({"x": 2, "y": 4})."""
    items = [t for t in re.split(r"[,\s]+(?=[A-Za-z_])", text.strip().strip("{}()")) if t]
    axes: dict[str, int] = {}
    for item in items:
        match = _MESH_ITEM.fullmatch(item.strip(" ,"))
        if match is None:
            raise ValueError(f"cannot read mesh axis {item.strip()!r}: write e.g. 'x=2, y=4'")
        if match[1] in axes:
            raise ValueError(f"mesh axis {match[1]!r} is named twice")
        axes[match[1]] = int(match[2])
    if not axes:
        raise ValueError("the mesh needs at least one axis, e.g. 'x=2, y=4'")
    return Mesh(axes)


def parse_tensor_shape(text: str) -> tuple[int, ...]:
    """`7, 6` or `(7, 6)` -> (7, 6): positive sizes, rank 1 to 4."""
    body = text.strip().strip("()[]").strip()
    parts = [p.strip() for p in body.split(",") if p.strip()]
    if not parts or not all(re.fullmatch(r"\d+", p) for p in parts):
        raise ValueError(f"cannot read the shape {text!r}: write sizes like '8, 6'")
    shape = tuple(int(p) for p in parts)
    if not 1 <= len(shape) <= 4 or min(shape) < 1:
        raise ValueError(f"shape {shape}: the editor shows ranks 1 to 4 with positive sizes")
    return shape


def pspec_text(sharding: Sharding) -> str:
    entries = [repr(spec_entry(axes)) for axes in sharding.spec]
    return f"P({', '.join(entries)})"


def dims_mapping_text(sharding: Sharding, ndim: int) -> str:
    """GSPMD dims_mapping, or the reason it cannot express this sharding."""
    try:
        mapping = sharding.dims_mapping(ndim)
    except ValueError as err:
        return f"not expressible: {err}"
    names = ", ".join(f"{i}={a}" for i, a in enumerate(sharding.mesh.axis_names))
    return f"{mapping}   (mesh dims: {names})"


def jax_code(sharding: Sharding, shape, dtype: str) -> str:
    """Plain jax that builds the same layout (padding uneven dims, as jax Arrays need) and
    prints which block each device holds. Runs as is: no numpy bfloat16, no `rich`."""
    mesh = sharding.mesh
    padded = tuple(
        k * t for k, t in zip(sharding.shard_shape(shape), sharding.tiles(len(shape)), strict=True)
    )
    lines = [
        "import jax",
        "import jax.numpy as jnp",
        "from jax.sharding import AxisType, NamedSharding, PartitionSpec as P",
        "",
        f"jax.config.update('jax_num_cpu_devices', {mesh.size})  # before any jax computation",
    ]
    if dtype == "float64":
        lines.append(
            "jax.config.update('jax_enable_x64', True)  # jax computes in 32 bits otherwise"
        )
    lines += [
        f"mesh = jax.make_mesh({mesh.sizes}, {mesh.axis_names}, "
        f"axis_types=(AxisType.Auto,) * {len(mesh.sizes)})",
        f"sharding = NamedSharding(mesh, {pspec_text(sharding)})",
    ]
    if padded != tuple(shape):
        lines.append(
            f"# jax Arrays need even shards, so pad {tuple(shape)} to {padded} "
            "(inside jax.jit, XLA pads for you)"
        )
    lines += [
        f"x = jax.device_put(jnp.zeros({padded}, jnp.{dtype}), sharding)",
        "for shard in x.addressable_shards:  # the block each device holds",
        "    print(shard.device.id, shard.index)",
    ]
    return "\n".join(lines)


def gv_code(sharding: Sharding, shape, dtype: str) -> str:
    axes = ", ".join(f'"{a}": {n}' for a, n in sharding.mesh.shape.items())
    spec = pspec_text(sharding)[2:-1]
    spec = f"({spec},)" if len(sharding.spec) == 1 else f"({spec})"
    return (
        "import gspmd_viz as gv\n"
        "from gspmd_viz.viz.arrays.layout import layout_figure\n\n"
        f"s = gv.Sharding(gv.Mesh({{{axes}}}), {spec})\n"
        f"layout_figure(s, {tuple(shape)}, '{dtype}')"
    )
