"""How few hops can pull-halving's long steps take? A SAT search over every class and schedule.

pull-halving (gspmd_viz/sim/collectives/pull_halving.py) halves each part of the buffer over
Swing's one-hop steps (1, -1 in every dim), adds whole blocks over its long steps, and gathers
back. After the one-hop steps every chip holds one block, summed over its tile: on a dim of n the
tiles are the windows of 4 chips around the pairs {4k - 1, 4k}, and a block's *class* holds one
chip per tile (4k or 4k - 1 in each dim, chosen tile by tile). The long steps must then add the
class's blocks: in each step every chip pulls the running sum of one other chip of its class
(any chip, any direction, dims mixed), and after log2(tiles) steps every chip has added every
tile exactly once. A step costs its longest route (torus L1 hops) times alpha, so the long
steps' latency is the sum over steps of each step's longest route: L.

This script asks a SAT solver whether some class and some schedule reach L <= budget. On the
32x32 pod pull-halving's long steps take L = 32; its 1 MiB time is 8 + L hops plus bytes, so
benchmarks/torus.py's 1.5x goal there (47.9 us) needs L <= 30. The answers printed are proofs:
UNSAT at a budget means no class and no schedule of this family reaches it.

The halvings also allow a brick layout: the y halves may flip from one pair of x steps to the
next (the x halves may not: the y steps' pairs fix them), so a column of tiles may sit 2 chips
further along dim 1. `--brick` lets the search choose that per column as well.

The encoding, per step k and tiles T, U, P: sel[k,T,P] (T pulls P; exactly one P), X[k,T,U]
(U's tile is in T's running sum). X[k] >= X[k-1] of T and of the pulled P; the two sums are
disjoint; |X[k,T]| <= 2^k (so X is exactly the sum, by induction); X[last] is everything. A
pull of a class member at distance d needs step k's longest route t_k >= d (t_k in unary, its
bits as the class's choices allow), and sum_k t_k <= budget.

Needs python-sat (`pip install python-sat`), which the package does not depend on. Run:
    python benchmarks/halving_bound.py 16 15 --shape 32        # one dim: seconds
    python benchmarks/halving_bound.py 32 31 --shape 32 32     # the pod: 5-7 min per budget
    python benchmarks/halving_bound.py 30 --brick              # about 20 min
"""

from __future__ import annotations

import argparse
import itertools
import time

try:
    from pysat.card import CardEnc, EncType
    from pysat.formula import IDPool
    from pysat.solvers import Cadical153
except ImportError as err:  # an optional tool, not a dependency of gspmd_viz
    raise SystemExit("this script needs python-sat: pip install python-sat") from err

TILE = 4  # chips per tile along a dim: Swing's one-hop steps 1, -1 halve twice


class Search:
    """The clauses for one shape (one class: the others are its mirror images and shifts)."""

    def __init__(self, shape: tuple[int, ...], brick: bool = False):
        self.shape, self.brick = shape, brick
        self.tiles = list(itertools.product(*(range(n // TILE) for n in shape)))
        self.steps = len(self.tiles).bit_length() - 1  # [T] tiles double per step
        self.longest = sum(n // 2 for n in shape)  # the torus diameter: no route is longer
        self.pool, self.clauses = IDPool(), []
        # place[T]: tile T's class member sits at 4 i - 1 (True) or 4 i (False) in each dim d,
        # then (brick) whether the tiles of T's column are 2 chips further along dim 1
        dims = range(len(shape))
        self.place = {T: [self.pool.id(("c", T, d)) for d in dims] for T in self.tiles}
        if brick:
            for T in self.tiles:
                self.place[T].append(self.pool.id(("brick", T[0])))
        self.ge = {(k, t): self.pool.id(("ge", k, t))
                   for k in range(self.steps) for t in range(1, self.longest + 1)}  # fmt: skip

    def member(self, T, bits) -> list[int]:
        """Coordinates of tile T's class member under its place bits."""
        at = [TILE * i - b for i, b in zip(T, bits, strict=False)]
        if self.brick:
            at[1] += 2 * bits[-1]
        return at

    def hops(self, T, P, bits_T, bits_P) -> int:
        """Torus L1 hops between the class members of tiles T and P under the given bits."""
        pairs = zip(self.shape, self.member(T, bits_T), self.member(P, bits_P), strict=True)
        return sum(min((a - b) % n, (b - a) % n) for n, a, b in pairs)

    def add_budget(self, budget: int):
        """t_k in unary (ge[k,t]: t_k >= t), every step at least one hop, sum_k t_k <= budget."""
        for k in range(self.steps):
            self.clauses.append([self.ge[k, 1]])
            for t in range(2, self.longest + 1):
                self.clauses.append([-self.ge[k, t], self.ge[k, t - 1]])
        self.at_most(list(self.ge.values()), budget)

    def at_most(self, literals, bound: int):
        encoded = CardEnc.atmost(literals, bound, vpool=self.pool, encoding=EncType.seqcounter)
        self.clauses += encoded.clauses

    def pull_needs_hops(self, k: int, T, P, sel: int):
        """T pulling P in step k needs t_k >= the hops their members are apart."""
        dims = len(self.place[T])
        for bits in itertools.product([0, 1], repeat=2 * dims):
            d = self.hops(T, P, bits[:dims], bits[dims:])
            members = self.place[T] + self.place[P]
            chosen = [-v if b else v for v, b in zip(members, bits, strict=True)]  # not these bits
            self.clauses.append([-sel, *chosen, self.ge[k, d]])

    def running_sum(self, k: int, T, U):
        """X[k,T,U] as a literal, or True/False for the constants of step 0."""
        return (T == U) if k == 0 else self.pool.id(("X", k, T, U))

    def implies(self, premises, conclusion):
        """premises (literals or booleans) together imply conclusion (a literal or False)."""
        if any(p is False for p in premises):
            return
        clause = [-p for p in premises if p is not True]
        self.clauses.append(clause if conclusion is False else [*clause, conclusion])

    def step(self, k: int):
        """Step k (from 1): each tile pulls another, its sum grows by the pulled one, disjointly."""
        for T in self.tiles:
            others = [P for P in self.tiles if P != T]
            sels = [self.pool.id(("sel", k, T, P)) for P in others]
            self.clauses.append(sels)
            self.at_most(sels, 1)
            for P, sel in zip(others, sels, strict=True):
                self.pull_needs_hops(k - 1, T, P, sel)
                for U in self.tiles:
                    mine, theirs = self.running_sum(k - 1, T, U), self.running_sum(k - 1, P, U)
                    self.implies([sel, theirs], self.running_sum(k, T, U))
                    self.implies([sel, mine, theirs], False)
            for U in self.tiles:
                self.implies([self.running_sum(k - 1, T, U)], self.running_sum(k, T, U))
            self.at_most_running(k, T)

    def at_most_running(self, k: int, T):
        """|X[k,T]| <= 2^k, and the last step's sum holds every tile."""
        row = [self.running_sum(k, T, U) for U in self.tiles]
        if k == self.steps:
            self.clauses += [[x] for x in row]
        else:
            self.at_most(row, 2**k)

    def solve(self, budget: int):
        """(True, step maxima) when some class and schedule fit the budget, else (False, None)."""
        self.add_budget(budget)
        for k in range(1, self.steps + 1):
            self.step(k)
        with Cadical153(bootstrap_with=self.clauses) as solver:
            if not solver.solve():
                return False, None
            model = {v for v in solver.get_model() if v > 0}
        maxima = [max(t for t in range(1, self.longest + 1) if self.ge[k, t] in model)
                  for k in range(self.steps)]  # fmt: skip
        self.replay(model, maxima)
        return True, maxima

    def replay(self, model, maxima):
        """Check a found schedule without the clauses: the pulled sums are disjoint, every step
        doubles them, the last holds every tile, and no pull is longer than its step's maximum."""
        bits = {T: [int(v in model) for v in self.place[T]] for T in self.tiles}
        sums = {T: {T} for T in self.tiles}
        for k in range(1, self.steps + 1):
            pulls = {T: P for T in self.tiles for P in self.tiles
                     if P != T and self.pool.id(("sel", k, T, P)) in model}  # fmt: skip
            assert all(not (sums[T] & sums[P]) for T, P in pulls.items()), "sums overlap"
            assert max(self.hops(T, P, bits[T], bits[P]) for T, P in pulls.items()) <= maxima[k - 1]
            sums = {T: sums[T] | sums[P] for T, P in pulls.items()}
        assert all(len(s) == len(self.tiles) for s in sums.values()), "a sum misses a tile"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("budgets", type=int, nargs="+", help="sums of step maxima to try")
    parser.add_argument("--shape", type=int, nargs="+", default=[32, 32])
    shifted = "also let each column of tiles shift its tiles 2 chips along dim 1"
    parser.add_argument("--brick", action="store_true", help=shifted)
    args = parser.parse_args()
    if args.brick and len(args.shape) != 2:
        parser.error("--brick needs a 2-D shape")
    if any(n % TILE or n < 2 * TILE for n in args.shape):
        parser.error(f"every dim must be a multiple of {TILE}, at least {2 * TILE}")
    for budget in args.budgets:
        start = time.perf_counter()
        found, maxima = Search(tuple(args.shape), args.brick).solve(budget)
        verdict = f"SAT, step maxima {maxima} (sum {sum(maxima)})" if found else "UNSAT"
        layout = " (brick)" if args.brick else ""
        print(f"shape {args.shape}{layout}, long steps' hops <= {budget}: {verdict} "
              f"[{time.perf_counter() - start:.0f} s]", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
