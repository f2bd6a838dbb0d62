"""The oracle for communication: the collectives in XLA's own partitioned HLO.

`collectives(f, *args, mesh=mesh)` compiles `f` with jax.jit on the mesh's devices and reads
every collective out of `compiled.as_text()`, as `gv.Collective`s (per-device operand shape,
group size from replica_groups, the mesh axes the groups run over, the jaxpr op that caused it).

replica_groups come in three syntaxes:
  explicit  `replica_groups={{0,1,2,3},{4,5,6,7}}`
  iota      `replica_groups=[2,4]<=[8]` or `[2,4]<=[4,2]T(1,0)`
  mesh      `replica_groups=mesh['axis_0'=2,'axis_1'=4], device_ids=([2,4]T(1,0)) {'axis_1'}`
XLA:CPU spells a reduce-scatter as an all-reduce whose result is only dynamic-sliced (1/n of
one dim per device): `parse_hlo` reports it as the reduce-scatter it is (xla.scatter.py).
"""

import functools
import re
from dataclasses import replace

import jax
import numpy as np

from gspmd_viz.core.sharding.collective import KINDS, Collective
from gspmd_viz.core.sharding.devices import require_devices
from gspmd_viz.core.sharding.mesh import Mesh
from gspmd_viz.core.sharding.sharding import Sharding
from gspmd_viz.core.spmd.run import pad_global, padded_shape
from gspmd_viz.xla.scatter import reduce_scatters, slicing_computations

_DTYPES = {"pred": "bool", "bf16": "bfloat16", "f16": "float16", "f32": "float32"}
_DTYPES |= {"f64": "float64", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64"}
_DTYPES |= {"u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}

_OP = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<type>\(.*?\)|\S+)\s+"
    r"(?P<kind>" + "|".join(KINDS) + r")(?P<start>-start)?\((?P<rest>.*)$"
)
_SHAPE = re.compile(r"(\w+)\[([\d,]*)\]")


# --- replica groups: three syntaxes -> explicit lists -------------------------------------


def _iota(dims, reshape=None, perm=None) -> np.ndarray:
    """XLA's IotaTileAssignment: arange, reshape, transpose, reshape to dims."""
    reshape = reshape or [int(np.prod(dims))]
    ids = np.arange(int(np.prod(reshape))).reshape(reshape)
    if perm is not None:
        ids = ids.transpose(perm)
    return ids.reshape(dims)


def _ints(text: str) -> list[int]:
    return [int(t) for t in re.findall(r"\d+", text)]


def _parse_iota(text: str) -> np.ndarray:
    """`[2,4]<=[4,2]T(1,0)`, `[2,4]<=[8]` or (mesh device_ids) `[2,4]T(1,0)`."""
    m = re.match(r"\[([\d,]+)\](?:<=\[([\d,]+)\])?(?:T\(([\d,]+)\))?", text.strip())
    if not m:
        raise ValueError(f"cannot read iota device list {text!r}")
    dims, reshape, perm = (_ints(g) if g else None for g in m.groups())
    if reshape is None:  # device_ids form: the bracket is the reshape, the result is flat
        return _iota([int(np.prod(dims))], dims, perm)
    return _iota(dims, reshape, perm)


def replica_groups(line: str) -> list[list[int]] | None:
    """The explicit device groups of one HLO collective line (None: no groups printed)."""
    m = re.search(r"replica_groups=mesh\[([^\]]*)\](?:, device_ids=\((.*?)\))?\s*\{([^}]*)\}", line)
    if m:
        return _mesh_groups(*m.groups())
    m = re.search(r"replica_groups=(\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)", line)
    if m:
        return _parse_iota(m.group(1)).tolist()
    m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", line)
    if m:
        return [_ints(g) for g in re.findall(r"\{([\d,]*)\}", m.group(1))]
    return None


def _mesh_groups(axes_text: str, device_ids: str | None, chosen: str) -> list[list[int]]:
    names = re.findall(r"'(\w+)'=(\d+)", axes_text)
    sizes = [int(n) for _, n in names]
    ids = _parse_iota(device_ids) if device_ids else np.arange(int(np.prod(sizes)))
    ids = np.asarray(ids).reshape(sizes)
    picked = [i for i, (name, _) in enumerate(names) if f"'{name}'" in chosen]
    rest = [i for i in range(len(names)) if i not in picked]
    grouped = ids.transpose(rest + picked).reshape(-1, int(np.prod([sizes[i] for i in picked])))
    return grouped.tolist()


def _permute_pairs(line: str) -> list[tuple[int, int]]:
    m = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", line)
    pairs = re.findall(r"\{(\d+),(\d+)\}", m.group(1)) if m else []
    return [(int(a), int(b)) for a, b in pairs]


def mesh_axes_of(groups: list[list[int]], mesh: Mesh) -> tuple[str, ...]:
    """Which of our mesh axes a set of device groups runs over ((), if none matches)."""
    first = sorted(groups[0])
    coords = [mesh.coords(d) for d in first]
    axes = tuple(a for a in mesh.axis_names if len({c[a] for c in coords}) > 1)
    size = int(np.prod([mesh.axis_size(a) for a in axes], dtype=int))
    return axes if size == len(first) else ()


# --- one HLO line -> Collectives -------------------------------------------------------------


def _shapes(type_text: str) -> list[tuple[np.dtype, tuple[int, ...]]]:
    return [
        (np.dtype(_DTYPES.get(dt, dt)), tuple(_ints(dims)))
        for dt, dims in _SHAPE.findall(type_text)
        if dt in _DTYPES
    ]


def _operand_shape(kind: str, shape, n: int, dims: list[int]):
    """Per-device operand shape from the result shape (HLO prints only the result's)."""
    shape = list(shape)
    if kind == "all-gather" and dims:
        shape[dims[0]] //= n
    elif kind == "reduce-scatter" and dims:
        shape[dims[0]] *= n
    return tuple(shape)


def _result_types(m) -> list:
    """Result array types; async `-start` ops print (operand, result, ...) tuples."""
    types = _shapes(m.group("type"))
    if m.group("start") and m.group("kind") == "all-gather":
        return types[len(types) // 2 :]
    if m.group("start") and m.group("kind") in ("collective-permute", "all-to-all"):
        return types[:1]
    return types


def parse_line(line: str, mesh: Mesh | None = None) -> list[Collective]:
    """The collective(s) on one HLO line (a tuple-typed all-reduce gives one per element)."""
    m = _OP.match(line)
    if not m:
        return []
    kind, rest = m.group("kind"), m.group("rest")
    source = re.search(r'op_name="([^"]*)"', rest)
    found = re.search(r"dimensions=\{([\d,]*)\}", rest)
    dims = _ints(found.group(1)) if found else []
    groups = None if kind == "collective-permute" else replica_groups(rest)
    n = 2 if kind == "collective-permute" else len(groups[0]) if groups else 1
    axes = mesh_axes_of(groups, mesh) if (mesh and groups) else ()
    if kind == "collective-permute" and mesh:
        axes = _permute_axes(_permute_pairs(rest), mesh)
    return [
        Collective(
            kind,
            axes,
            _operand_shape(kind, shape, n, dims),
            dtype,
            n,
            source.group(1) if source else "",
            tuple(dims),
        )
        for dtype, shape in _result_types(m)
    ]


def _permute_axes(pairs, mesh: Mesh) -> tuple[str, ...]:
    moved = [(mesh.coords(a), mesh.coords(b)) for a, b in pairs if a != b]
    return tuple(a for a in mesh.axis_names if any(s[a] != t[a] for s, t in moved))


_COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.\-]+) ")
_CALLED = re.compile(r"(?:body|condition|calls|to_apply|branch_computations=\{[^}]*)=?%([\w.\-]+)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def computations(text: str) -> tuple[dict[str, list[str]], str | None]:
    """computation name -> its lines, and the ENTRY computation's name."""
    comps: dict[str, list[str]] = {}
    name = entry = None
    for line in text.splitlines():
        m = _COMPUTATION.match(line)
        if m and line.rstrip().endswith("{"):
            name = m.group(1)
            comps[name] = []
            entry = name if line.startswith("ENTRY") else entry
        elif name is not None:
            comps[name].append(line)
    return comps, entry


def _trips(comps: dict, entry: str | None) -> dict[str, tuple[int, str]]:
    """computation -> (how many times it runs per program run, note). A while body runs its
    known_trip_count; without one (a data-dependent loop) one trip is counted, and said."""
    found: dict[str, tuple[int, str]] = {}
    todo = [(entry, 1, "")] if entry else []
    while todo:
        name, n, note = todo.pop()
        if name in found or name not in comps:
            continue
        found[name] = (n, note)
        for line in comps[name]:
            count = _TRIPS.search(line)
            is_while = " while(" in line
            for called in _CALLED.findall(line):
                if is_while and count:
                    todo.append((called, n * int(count.group(1)), note))
                elif is_while:
                    todo.append((called, n, "data-dependent trip count: one trip counted"))
                else:
                    todo.append((called, n, note))
    return found


def _fair(lines: list[str], mesh: Mesh | None, slicing: set[str]) -> list[list[Collective]]:
    """The collectives of each line of one computation, an all-reduce that is only
    dynamic-sliced to 1/n of one dim reported as the reduce-scatter it is."""
    found = [parse_line(line, mesh) for line in lines]
    single = {
        i: cs[0].group_size
        for i, cs in enumerate(found)
        if len(cs) == 1 and cs[0].kind == "all-reduce"
    }
    for i, dim in reduce_scatters(lines, single, slicing).items():
        found[i] = [replace(found[i][0], kind="reduce-scatter", dims=(dim,))]
    return found


def parse_hlo(text: str, mesh: Mesh | None = None) -> list[Collective]:
    """Every collective in a partitioned HLO module's text, in program order; one inside a
    loop body counts all its trips (`trips`, and `wire_bytes` over all of them); XLA:CPU's
    all-reduce + dynamic-slice counts as a reduce-scatter."""
    return [c for _, c in parse_hlo_lines(text, mesh)]


def parse_hlo_lines(text: str, mesh: Mesh | None = None) -> list[tuple[str, Collective]]:
    """`parse_hlo`, each collective with the HLO line it was read from (its metadata names
    the op and stack frame that made it)."""
    comps, entry = computations(text)
    slicing = slicing_computations(comps)
    if entry is None:  # a bare list of instructions
        comps = {"": text.splitlines()}
    trips = _trips(comps, entry) if entry is not None else {}
    found = []
    for name, lines in comps.items():
        n, note = trips.get(name, (1, ""))
        for line, cs in zip(lines, _fair(lines, mesh, slicing), strict=True):
            found += [(line, replace(c, trips=n, trips_note=note)) for c in cs]
    return found


# --- compiling -------------------------------------------------------------------------------


def _named(sharding: Sharding | None):
    return None if sharding is None else sharding.to_named_sharding()


def _uneven_pins(mesh: Mesh, tree, flat) -> list[tuple[Sharding | None, bool]]:
    """(pin, splits its array unevenly?) per flat leaf of `tree` (None: unpinned)."""
    leaves = jax.tree.leaves(tree)
    if len(flat) != len(leaves):
        raise ValueError(f"got {len(flat)} shardings for {len(leaves)} arrays")
    pins = []
    for leaf, s in zip(leaves, flat, strict=True):
        sharding = s if s is None or isinstance(s, Sharding) else Sharding(mesh, s)
        uneven = sharding is not None and padded_shape(sharding, leaf.shape) != leaf.shape
        pins.append((sharding, uneven))
    return pins


def _constrain_uneven(tree, pins, pad: bool):
    """Constrain the leaves whose pins are uneven (and pad them to an even split)."""
    leaves, structure = jax.tree.flatten(tree)
    for i, (sharding, uneven) in enumerate(pins):
        if uneven:
            leaves[i] = jax.lax.with_sharding_constraint(leaves[i], _named(sharding))
            leaves[i] = pad_global(leaves[i], sharding) if pad else leaves[i]
    return jax.tree.unflatten(structure, leaves)


def compiled_text(f, *args, mesh: Mesh, in_shardings=None, out_shardings=None) -> str:
    """XLA's partitioned HLO of `jax.jit(f)` with the given shardings, on `mesh`'s devices."""
    return compiled(
        f, *args, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings
    ).as_text()


def compiled(f, *args, mesh: Mesh, in_shardings=None, out_shardings=None):
    """XLA's compiled executable of `jax.jit(f)` with the given shardings, on `mesh`'s devices:
    `lowered(...)`, compiled."""
    return lowered(
        f, *args, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings
    ).compile()


def lowered(f, *args, mesh: Mesh, in_shardings=None, out_shardings=None):
    """`jax.jit(f)` with the given shardings on `mesh`'s devices, lowered for XLA (jax's
    Lowered; XLA's partitioner runs when it is compiled): `traced(...)`, lowered."""
    return traced(
        f, *args, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings
    ).lower()


def traced(f, *args, mesh: Mesh, in_shardings=None, out_shardings=None):
    """`jax.jit(f)` with the given shardings on `mesh`'s devices, traced to a jaxpr (jax's
    Traced: `.lower()` makes XLA's input program, as gv.trace makes ours).

    jax.jit needs boundary shardings that split their arrays evenly; XLA pads only inside a
    program. So an uneven input pin arrives replicated and is constrained first (a free local
    slice, as for us), and an uneven output is constrained, then padded to split evenly (the
    same per-device buffers; XLA moves nothing for it).
    """
    require_devices(mesh.size, f"XLA's partitioner on {mesh!r}")
    kwargs, ins, outs = {}, [], []
    if in_shardings is not None:
        ins = _uneven_pins(mesh, args, list(in_shardings))
        replicated = Sharding(mesh, ())
        pins = [_named(replicated if uneven else s) for s, uneven in ins]
        kwargs["in_shardings"] = jax.tree.unflatten(jax.tree.structure(args), pins)
    if out_shardings is not None:
        flat = [out_shardings] if isinstance(out_shardings, Sharding) else list(out_shardings)
        shapes = jax.eval_shape(f, *args)
        outs = _uneven_pins(mesh, shapes, flat)
        pins = [_named(s) for s, _ in outs]
        kwargs["out_shardings"] = jax.tree.unflatten(jax.tree.structure(shapes), pins)

    @functools.wraps(f)  # XLA's op_names keep naming the user's function
    def pinned(*a):
        return _constrain_uneven(f(*_constrain_uneven(a, ins, pad=False)), outs, pad=True)

    return jax.jit(pinned, **kwargs).trace(*args)


def collectives(f, *args, mesh: Mesh, in_shardings=None, out_shardings=None) -> list[Collective]:
    """The collectives XLA's partitioner emits for `f(*args)` on `mesh` (gv.Collective form).

    Annotations inside `f` (gv.mesh_split) apply as usual. `in_shardings` / `out_shardings`
    pin the boundaries: one gv.Sharding (or spec tuple, or None) per flat input / output leaf.
    """
    text = compiled_text(
        f, *args, mesh=mesh, in_shardings=in_shardings, out_shardings=out_shardings
    )
    return parse_hlo(text, mesh)
