"""Torus simulator benchmark: speed at pod scale, and how close each algorithm gets to the bound.

Run: .venv/bin/python benchmarks/torus.py
Prints (1) wall time to simulate the 2-D all-reduce and set up its frames (a step is worked out
when drawn) at 64, 1024 and 4096 chips (goal: 4096-chip multipod under 2 s), (2) every all-reduce
algorithm's simulated time over its bandwidth lower bound on the 32x32 TPU-v3 pod (goal: best 2-D
algorithm within 1.1x for large payloads), (3) all-to-all against its bounds, (4) the goals of
today's pods: on the 32x32 pod the fastest algorithm ("auto") for 32 KiB, 1 MiB and 1 GiB against
max(bandwidth bound, diameter x hop latency) (goals: 1.5x, 1.5x, 1.1x), auto picking the
algorithm and how many pieces the payload runs in (sim.in_flight), beside the same algorithm in
lockstep (one piece) and its steps' hops (sum of longest route x alpha, one piece's chain) and
bytes (sum of busiest link / beta over every piece), with auto's runner-up, a 9,216-chip
all-reduce simulated under 2 s, (5) every preset's figures with their
sources, (6) twisted tori against untwisted ones of the same shape: diameter, cut links, an
all-to-all, and (7) gv.sim.place's device order against the naive one on twisted and untwisted
slices.
"""

from __future__ import annotations

import statistics
import time

import gspmd_viz.sim as sim
from gspmd_viz.viz.torus import widget as torus_view

SIZES = [("8x8 torus", sim.torus((8, 8))), ("tpu-v3-pod", sim.preset("tpu-v3-pod")),
         ("tpu-v3-multipod", sim.preset("tpu-v3-multipod"))]  # fmt: skip


def wall(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def scaling(nbytes=2**25):
    print(f"1) simulate 2-D all-reduce ({nbytes // 2**20} MiB/chip) + set up frames "
          "(a step is worked out when drawn)")  # fmt: skip
    print(f"   {'topology':<18}{'chips':>6}{'algorithm':>18}{'steps':>7}{'wall':>10}{'x 64':>8}"
          "   chip colour in frames")  # fmt: skip
    base = {}
    for label, topo in SIZES:
        for name in ("torus-2d", "torus-2d-halves"):
            tl = sim.simulate(topo, "all-reduce", nbytes, algorithm=name)
            t = wall(lambda topo=topo, name=name: torus_view.frames(
                sim.simulate(topo, "all-reduce", nbytes, algorithm=name)))  # fmt: skip
            label_held = torus_view.frames(tl).held_label
            base.setdefault(name, t)
            print(f"   {label:<18}{topo.n_chips:>6}{name:>18}{len(tl.steps):>7}"
                  f"{t * 1e3:>8.0f}ms{t / base[name]:>7.1f}x   {label_held}")  # fmt: skip
    return base


def ratios():
    pod = sim.preset("tpu-v3-pod")
    sizes = [2**20, 2**26, 2**30]
    print("\n2) all-reduce on the 32x32 TPU-v3 pod: simulated time / bandwidth lower bound")
    print(f"   {'algorithm':<20}" + "".join(f"{_b(s):>22}" for s in sizes))
    for name in sim.algorithms("all-reduce"):
        if name.startswith("torus-3d"):
            continue
        row = []
        for s in sizes:
            tl = sim.simulate(pod, "all-reduce", s, algorithm=name)
            row.append(f"{tl.time_s / tl.lower_bound_s:.2f}x ({tl.time_s * 1e3:.3g} ms)")
        print(f"   {name:<20}" + "".join(f"{r:>22}" for r in row))
    bound = sim.lower_bound(pod, "all-reduce", sizes[-1])
    print(f"   bandwidth lower bound at {_b(sizes[-1])}: {bound * 1e3:.3f} ms")
    cube, size = sim.preset("tpu-v4-4x4x4"), 384 * 2**20
    print(f"\n   3-D: {cube.describe()}, tpu-v4, {size // 2**20} MiB/chip")
    for name in ("torus-3d", "torus-3d-halves", "torus-3d-thirds"):
        tl = sim.simulate(cube, "all-reduce", size, algorithm=name, chip="tpu-v4")
        print(f"   {name:<20}{tl.time_s / tl.lower_bound_s:>8.2f}x ({tl.time_s * 1e3:.3g} ms)")
    a2a = sim.simulate(sim.torus((16, 16)), "all-to-all", 2**24)
    inj = (255 / 256) * 2**24 / (4 * a2a.chip.ici_link_bandwidth_Bps)
    print(f"\n3) all-to-all on 16x16 torus, 16 MiB/chip: {a2a.time_s * 1e3:.3f} ms = "
          f"{a2a.time_s / inj:.1f}x the injection bound, "
          f"{a2a.time_s / a2a.lower_bound_s:.2f}x the bisection bound")  # fmt: skip


def goals():
    pod = sim.preset("tpu-v3-pod")
    latency = sim.latency_bound(pod)
    print(f"\n4) all-reduce on the 32x32 pod, algorithm='auto' vs max(bandwidth bound, "
          f"diameter x hop latency = {latency * 1e6:.0f} us)")  # fmt: skip
    for s, goal in [(2**15, 1.5), (2**20, 1.5), (2**30, 1.1)]:
        tl = sim.simulate(pod, "all-reduce", s, algorithm="auto", pad=True)
        bound = max(tl.lower_bound_s, latency)
        ratio = tl.time_s / bound
        one = sim.simulate(pod, "all-reduce", s, algorithm=tl.algorithm, pad=True)
        hops, nbytes = _split(tl)
        print(f"   {_b(s):>7}: {sim.registry.label(tl.algorithm, tl.pieces):<28} "
              f"{tl.time_s * 1e6:9.1f} us = {ratio:.2f}x (goal {goal}x: "
              f"{'met' if ratio <= goal else 'NOT met'}); hops {hops * 1e6:.1f} us "
              f"({hops / bound:.2f}x alone) + bytes {nbytes * 1e6:.1f} us; in lockstep "
              f"{one.time_s * 1e6:.1f} us = {one.time_s / bound:.2f}x")  # fmt: skip
        print(f"            {tl.why}")
    big = sim.preset("tpu7x-9216")
    t = wall(lambda: sim.simulate(big, "all-reduce", 2**30, "torus-3d", pad=True), repeats=1)
    print(f"   {big.describe()}: torus-3d all-reduce of 1 GiB simulated in {t:.2f} s (goal < 2 s)")
    print("\n5) presets and their sources")
    for row in sim.presets.table():
        print(f"   {row['preset']:<14}{row['pod']:>9}  {row['wraparound']:<18}"
              f"{row['bf16 TFLOP/s']:>6.0f} TFLOP/s {row['HBM GiB']:>4.0f} GiB "
              f"{row['ICI GB/s/link/dir']:>4.0f} GB/s/link  chip: {row['chip source']}; "
              f"topology: {row['topology source']}")  # fmt: skip


def _split(tl):
    """(seconds of hops, seconds of bytes) of a timeline: one piece's steps' longest routes x
    alpha, and every piece's steps' busiest links' bytes / beta. In lockstep (one piece) the
    time is their sum; pieces overlap them."""
    hops = sum(r.max_hops for r in tl.steps if r.piece == 0) * tl.chip.hop_latency_s
    return hops, sum(r.max_link_bytes for r in tl.steps) / tl.chip.ici_link_bandwidth_Bps


def twisted(nbytes=2**24):
    print(f"\n6) twisted tori vs untwisted, all-to-all of {nbytes // 2**20} MiB/chip ('direct')")
    for name in ("tpu-v4-4x4x8", "tpu-v5p-4x8x8", "tpu-v5p-8x8x16"):
        for topo in (sim.preset(name), sim.preset(f"{name}-twisted")):
            tl = sim.simulate(topo, "all-to-all", nbytes, "direct", pad=True)
            cuts = [sim.cost.cut_links(topo, d) for d in range(topo.ndim)]
            print(f"   {topo.name:<24} diameter {sim.cost.diameter(topo):>2}, cut links per dim "
                  f"{cuts}: {tl.time_s * 1e6:8.1f} us (bisection bound "
                  f"{tl.lower_bound_s * 1e6:.1f} us)")  # fmt: skip


PLACEMENTS = [({"x": 32, "y": 4}, "tpu-v4-4x4x8", "x"), ({"x": 64, "y": 4}, "tpu-v5p-4x8x8", "x"),
              ({"x": 4, "y": 8, "z": 4}, "tpu-v4-4x4x8", "y"),
              ({"a": 4, "b": 4, "c": 8}, "tpu-v4-4x4x8", "a"),
              ({"data": 16, "model": 16}, "tpu-v4-4x8x8", "data"),
              ({"x": 256, "y": 8}, "tpu-v4-8x16x16", "x")]  # fmt: skip


def placements(nbytes=2**24):
    print(f"\n7) gv.sim.place on twisted slices: all-reduce of {nbytes // 2**20} MiB/chip over one "
          "mesh axis, every group at once;\n   time / longest ring edge / busiest link, naive and "
          "place orders, untwisted and twisted")  # fmt: skip
    for mesh, name, axis in PLACEMENTS:
        cells = []
        for topo in (sim.preset(name), sim.preset(f"{name}-twisted")):
            for how in ("naive", "good"):
                c = sim.place(mesh, topo, how).collective(axis, nbytes=nbytes)
                mib = c.busiest_link_bytes / 2**20
                cells.append(f"{c.time_s * 1e6:7.0f} us {c.max_hops:>2} hops {mib:5.1f} MiB")
        print(f"   {name:<15}{str(mesh):<28}{axis:<5} plain:   naive {cells[0]}, place {cells[1]}")
        print(f"   {'':<48}twisted: naive {cells[2]}, place {cells[3]}")
    topo = sim.preset("tpu-v4-8x16x16-twisted")
    t = wall(lambda: sim.simulate(topo, "all-reduce", 2**20, "bidirectional-ring"))
    print(f"   bidirectional ring through all {topo.n_chips} chips of {topo.name}: simulated in "
          f"{t * 1e3:.0f} ms")  # fmt: skip


def _b(s):
    if s >= 2**30:
        return f"{s // 2**30} GiB"
    return f"{s // 2**20} MiB" if s >= 2**20 else f"{s // 2**10} KiB"


if __name__ == "__main__":
    t0 = time.perf_counter()
    scaling()
    ratios()
    goals()
    twisted()
    placements()
    print(f"\nwhole benchmark: {time.perf_counter() - t0:.1f} s")
