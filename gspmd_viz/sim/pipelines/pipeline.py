"""Pipeline schedules as data, and their closed-form bubble fractions (numpy only).

A pipeline cuts a model of L = S·V layers into S stages; layer l lives on stage l % S as its
chunk l // S (V chunks per stage; V = 1 is the plain pipeline). The batch is cut into M
microbatches. Each stage runs a fixed *order* of actions: F (forward of one microbatch through
one chunk), B (its backward) and, for zero-bubble schedules, W (the weight-gradient half of B).
That order is the schedule; when each action runs follows from its inputs (see
``pipeline_timing.simulate``). The tick of an action is its start when every action takes one
time unit and transfers are free: a table every device can follow in lockstep.

Orders, per stage i:
- ``gpipe`` [GPipe, 1811.06965]: all M forwards, then all M backwards (last microbatch first,
  as the backward of a loop runs).
- ``1f1b`` [PipeDream-flush]: min(S-i-1, M) warm-up forwards, then one F one B, then the rest B.
- ``interleaved-1f1b`` [Megatron-LM, 2104.04473]: forwards walk microbatches in groups of S
  through chunks 0..V-1; (S-i-1)·2 + (V-1)·S warm-up forwards, then 1F1B.
- ``circular`` [GSPMD; praxis CircularLayerwiseShardablePipelined, circular_repeat R = V]: a
  state buffer rotating through the S stages; at loop iteration t stage i works on k = t - i:
  microbatch k mod M in repeat (chunk) k div M, so all M microbatches pass repeat 0 before any
  starts repeat 1 (M >= S, or a microbatch would come back to stage 0 before it is free).
  V·M + S - 1 iterations of forwards, then the backward of that loop (the reverse order).
- ``zb-h1`` [Zero Bubble Pipeline Parallelism, Qi et al. 2023, 2401.10241]: 1F1B's F and B,
  where B is only the input gradient and W (the weight gradient) is deferred: stage i lets i of
  them wait, so it holds at most S microbatches (1F1B's stage 0 peak), and the waiting Ws fill
  the cool-down bubbles.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from gspmd_viz.sim.pipelines.pipeline_engine import KINDS, start_times

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "circular", "zb-h1")
_MULTI_CHUNK = ("interleaved-1f1b", "circular")


@dataclasses.dataclass(frozen=True)
class Action:
    stage: int
    tick: int
    kind: str  # "F", "B" or "W"
    microbatch: int
    chunk: int
    layer: int  # chunk * stages + stage


@dataclasses.dataclass(frozen=True, eq=False)
class PipelineSchedule:
    """Per-stage action orders of one pipeline schedule, plus the lockstep tick table.

    Arrays (one entry per action, grouped by stage, in each stage's order): ``stage``, ``kind``
    (index into KINDS), ``microbatch``, ``chunk``, and ``tick`` (computed when first read).
    ``sends`` lists every transfer between stages: (tick it leaves, src stage, dst stage,
    "activation"/"gradient", microbatch, layer it feeds).
    """

    name: str
    stages: int
    microbatches: int
    virtual: int
    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray

    kind_names = KINDS  # what the codes in ``kind`` mean

    @functools.cached_property
    def tick(self) -> np.ndarray:
        """Lockstep ticks: every action one time unit, transfers free (a consumer runs one
        tick after its producer at the earliest). Computed on first use."""
        ones = np.ones(len(self.kind))
        start, _ = start_times(self.stage, self.kind, self.microbatch, self.chunk, self.stages,
                               self.virtual, ones)  # fmt: skip
        return start.astype(np.int64)

    @property
    def layers(self) -> int:
        return self.stages * self.virtual

    @property
    def layer(self) -> np.ndarray:
        return self.chunk * self.stages + self.stage

    @property
    def n_ticks(self) -> int:
        return int(self.tick.max()) + 1

    @property
    def has_weight_actions(self) -> bool:
        return bool((self.kind == KINDS.index("W")).any())

    def actions(self) -> list[Action]:
        cols = (self.stage, self.tick, self.kind, self.microbatch, self.chunk, self.layer)
        return [
            Action(int(s), int(t), KINDS[k], int(m), int(c), int(lay))
            for s, t, k, m, c, lay in zip(*cols, strict=True)
        ]

    def table(self) -> np.ndarray:
        """[n_ticks, S] action index running on each stage at each tick, -1 when idle."""
        out = np.full((self.n_ticks, self.stages), -1, np.int64)
        out[self.tick, self.stage] = np.arange(len(self.tick))
        return out

    @property
    def sends(self) -> list[tuple[int, int, int, str, int, int]]:
        out = []
        for a in self.actions():
            if a.kind == "F" and a.layer < self.layers - 1:
                out.append((a.tick, a.stage, (a.layer + 1) % self.stages, "activation",
                            a.microbatch, a.layer + 1))  # fmt: skip
            elif a.kind == "B" and a.layer > 0:
                out.append((a.tick, a.stage, (a.layer - 1) % self.stages, "gradient",
                            a.microbatch, a.layer - 1))  # fmt: skip
        return out

    def text(self) -> str:
        """One row per stage, one cell per tick: F3 = forward of microbatch 3 (chunk in a.b)."""
        table = self.table()
        rows = []
        for s in range(self.stages):
            cells = [self._cell(i) for i in table[:, s]]
            rows.append(f"stage {s}: " + " ".join(cells))
        return "\n".join(rows)

    def _cell(self, i: int) -> str:
        width = len(str(self.microbatches - 1)) + (2 if self.virtual > 1 else 0) + 1
        if i < 0:
            return ".".center(width)
        label = f"{KINDS[self.kind[i]]}{self.microbatch[i]}"
        if self.virtual > 1:
            label += f".{self.chunk[i]}"
        return label.ljust(width)

    def __repr__(self):
        v = f", V={self.virtual}" if self.virtual > 1 else ""
        return (
            f"PipelineSchedule({self.name}, S={self.stages}, M={self.microbatches}{v}: "
            f"{len(self.kind)} actions in {self.n_ticks} ticks)"
        )


# ----- the orders ------------------------------------------------------------------------------
_F, _B, _W = range(3)


def _forward_walk(group: int, microbatches: int, virtual: int) -> tuple[np.ndarray, np.ndarray]:
    """(microbatch, chunk) of the k-th forward on any stage: microbatches in groups of `group`
    go through chunks 0..V-1 (Megatron: groups of S; the circular pipeline: one group of M)."""
    block, rest = np.divmod(np.arange(microbatches * virtual), group * virtual)
    return block * group + rest % group, rest // group


def _one_f_one_b(n: int, warmup: int) -> np.ndarray:
    """Kinds: warm-up forwards, then one F one B, then the remaining Bs."""
    return np.concatenate([np.full(warmup, _F), np.tile([_F, _B], n - warmup),
                           np.full(warmup, _B)])  # fmt: skip


def _defer_weights(kinds: np.ndarray, deferred: int) -> np.ndarray:
    """Insert W(j) after the (j + deferred)-th B; the Ws still waiting go at the end."""
    b_at = np.flatnonzero(kinds == _B)
    out = np.insert(kinds, b_at[deferred:] + 1, _W)
    return np.concatenate([out, np.full(min(deferred, len(b_at)), _W)])


def _stage_order(name: str, i: int, S: int, forwards, V: int):
    """(kinds, forward order, backward order) of stage i; Ws follow the backward order."""
    n = len(forwards[0])
    if name in ("gpipe", "circular"):
        kinds = np.repeat([_F, _B], n)
        return kinds, forwards, (forwards[0][::-1], forwards[1][::-1])
    backwards = (forwards[0], V - 1 - forwards[1])  # the chunks come back in reverse
    warmup = S - i - 1 if V == 1 else (S - i - 1) * 2 + (V - 1) * S
    kinds = _one_f_one_b(n, min(warmup, n))
    kinds = _defer_weights(kinds, deferred=i) if name == "zb-h1" else kinds
    return kinds, forwards, backwards


def _fill(kinds, forwards, backwards) -> tuple[np.ndarray, np.ndarray]:
    """Microbatch and chunk of every action: the k-th F takes forwards[k], and so on."""
    mb, chunk = np.empty(len(kinds), np.int64), np.empty(len(kinds), np.int64)
    for code, (m, c) in ((_F, forwards), (_B, backwards), (_W, backwards)):
        sel = kinds == code
        mb[sel], chunk[sel] = m[: sel.sum()], c[: sel.sum()]
    return mb, chunk


def check_shape(name: str, stages, microbatches, virtual) -> None:
    """Clear errors for a bad schedule name or a bad S, M, V combination."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {name!r}; known: {', '.join(SCHEDULES)}")
    for label, v in (("stages", stages), ("microbatches", microbatches), ("virtual", virtual)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{label} must be a positive whole number, got {v!r}")
    if virtual > 1 and name not in _MULTI_CHUNK:
        raise ValueError(
            f"{name!r} runs one chunk per stage (virtual=1); for virtual={virtual} chunks per "
            f"stage pick 'interleaved-1f1b' or 'circular'"
        )
    if name == "zb-h1" and microbatches < stages:
        raise ValueError(
            f"'zb-h1' fills the cool-down with deferred W passes, which needs at least as many "
            f"microbatches as stages: microbatches >= {stages}, got {microbatches}"
        )
    if name == "interleaved-1f1b" and virtual > 1 and microbatches % stages:
        raise ValueError(
            f"{name!r} with virtual={virtual} sends microbatches round the stages in groups of "
            f"S={stages}: microbatches must be a multiple of {stages}, got {microbatches}"
        )
    if name == "circular" and virtual > 1 and microbatches < stages:
        raise ValueError(
            f"'circular' with virtual={virtual} sends microbatch m back to stage 0 after all "
            f"M pass it: microbatches >= stages = {stages} (as in praxis), got {microbatches}"
        )


def schedule(name: str, stages: int, microbatches: int, virtual: int = 1) -> PipelineSchedule:
    """The schedule `name` for S stages, M microbatches, V chunks per stage, as data."""
    check_shape(name, stages, microbatches, virtual)
    group = microbatches if name == "circular" else stages
    forwards = _forward_walk(group, microbatches, virtual)
    orders = [_stage_order(name, i, stages, forwards, virtual) for i in range(stages)]
    kind = np.concatenate([k for k, _, _ in orders])
    stage = np.repeat(np.arange(stages), [len(k) for k, _, _ in orders])
    filled = [_fill(*order) for order in orders]
    mb = np.concatenate([m for m, _ in filled])
    chunk = np.concatenate([c for _, c in filled])
    return PipelineSchedule(name, stages, microbatches, virtual, stage, kind, mb, chunk)


def _zb_idle(stages, forward, backward, weight) -> float:
    """ZB-H1's idle time per stage, (S-1)(t_F + t_B - t_W): exact when t_W <= t_F, t_B."""
    if not weight <= min(forward, backward):
        raise ValueError(
            f"the zb-h1 closed form holds when weight <= forward and weight <= backward, got "
            f"F:B:W = {forward}:{backward}:{weight}; simulate() handles any ratio"
        )
    return (stages - 1) * (forward + backward - weight)


def bubble_fraction(name, stages, microbatches, virtual=1, forward=1.0, backward=1.0,
                    weight=1.0) -> float:  # fmt: skip
    """Closed form: (S-1)/(M+S-1) for gpipe and 1f1b, (S-1)/(V·M+S-1) with V chunks (any
    F:B ratio); zb-h1: (S-1)(F+B-W) / (M(F+B+W) + (S-1)(F+B-W)), 1/3 of 1F1B's at F=B=W."""
    check_shape(name, stages, microbatches, virtual)
    if name == "zb-h1":
        idle = _zb_idle(stages, forward, backward, weight)
        return idle / (microbatches * (forward + backward + weight) + idle)
    return (stages - 1) / (virtual * microbatches + stages - 1)


def makespan(name, stages, microbatches, virtual=1, forward=1.0, backward=2.0, weight=0.0):
    """Closed form: (M + (S-1)/V)·(t_F + t_B + t_W), times of one microbatch through a whole
    stage; zb-h1: M(t_F + t_B + t_W) + (S-1)(t_F + t_B - t_W)."""
    check_shape(name, stages, microbatches, virtual)
    work = forward + backward + weight
    if name == "zb-h1":
        return microbatches * work + _zb_idle(stages, forward, backward, weight)
    return (microbatches + (stages - 1) / virtual) * work
