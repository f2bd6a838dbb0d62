"""XLA:CPU's reduce-scatter, recognized: an all-reduce whose result is only dynamic-sliced.

XLA:CPU has no reduce-scatter kernel, so its partitioner spells one as an all-reduce over n
devices followed by a dynamic-slice (alone, or fused) that keeps 1/n of one dim on each device.
Counted as an all-reduce, that moves 2(n-1)/n·S; the reduce-scatter it stands for moves
(n-1)/n·S. `reduce_scatters(lines)` finds them in one HLO computation so that
`compiled.parse_hlo` reports each as the reduce-scatter it is, with its bytes.
# XLA: ReduceScatterCreator / AllReduceDynamicSlice patterns (the pass other backends run)
"""

from __future__ import annotations

import re

_DEF = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=\s*(\S+)\s+([\w\-]+)\((.*)$")
_DIMS = re.compile(r"^\w+\[([\d,]*)\]")
_CALLS = re.compile(r"calls=%([\w.\-]+)")


def slicing_computations(comps: dict[str, list[str]]) -> set[str]:
    """Names of the computations (fusions) that contain a dynamic-slice; `comps`: name -> its
    lines, as xla_collectives splits a module."""
    return {n for n, lines in comps.items() if any(" dynamic-slice(" in line for line in lines)}


def _dims(type_text: str) -> tuple[int, ...] | None:
    m = _DIMS.match(type_text)
    return tuple(int(d) for d in m.group(1).split(",") if d) if m else None


def _sliced_dim(user: re.Match, shape, n: int, slicing: set[str]) -> int | None:
    """The one dim this user keeps 1/n of, if it is a (fused) dynamic-slice; else None."""
    op, rest = user.group(3), user.group(4)
    calls = _CALLS.search(rest)
    if not (op == "dynamic-slice" or (op == "fusion" and calls and calls.group(1) in slicing)):
        return None
    after = _dims(user.group(2))
    if after is None or len(after) != len(shape):
        return None
    diff = [d for d, (a, b) in enumerate(zip(shape, after, strict=True)) if a != b]
    return diff[0] if len(diff) == 1 and shape[diff[0]] == n * after[diff[0]] else None


def reduce_scatters(lines: list[str], group_sizes: dict[int, int], slicing: set[str]):
    """{line index: dim} of the all-reduces among `lines` (one computation) whose every user
    keeps 1/n of the same dim. `group_sizes`: line index of each one-array all-reduce -> n."""
    defs = {i: m for i, m in ((i, _DEF.match(line)) for i, line in enumerate(lines)) if m}
    found = {}
    for i, n in group_sizes.items():
        shape = _dims(defs[i].group(2)) if i in defs else None
        if shape is None:
            continue
        name = defs[i].group(1)
        use = re.compile(r"%" + re.escape(name) + r"(?![\w.\-])")
        users = [m for j, m in defs.items() if j != i and use.search(m.group(4))]
        dims = {_sliced_dim(u, shape, n, slicing) for u in users}
        if users and len(dims) == 1 and None not in dims:
            found[i] = dims.pop()
    return found
