"""The model's fitted parameters: fitted once on published step times, no per-system knob.

The model is linear in its parameters (model.py): step = (gemm·slowdown[g] + attention·
attention_slowdown + memory-bound work)·(1 + bubble) + Σ raw_k·exposed_k + opt_bytes·opt_s_per_gb + other_s[r], with g the (catalog GPU, precision)
group and r the MLPerf round (its software: the same configs got faster every round), save the DP
column, which depends on the achieved compute and is solved again with the fit's own.
They are fitted by bounded least squares on the relative error (exposures in [0, 1]; the rest
≥ 0; slowdown ≥ 1, no config beats the dense peak, or ≥ peak / the GEMM rate azbench's GPU check
measured on that GPU and precision, recipes/published/gemm_rates.csv: a step's GEMMs cannot beat
a large GEMM alone).

A group the fit has no scale for (a new GPU or precision) takes its slowdown from the balance
line: the fitted groups' slowdowns against their balance x = dense peak / HBM bandwidth (TFLOP/s
per TB/s; recipes/published/hbm_bandwidth.csv, from the datasheets), a straight line fitted by least squares weighted by each group's
scales, read at the new group's x. A roofline in the mean: each FLOP of a step costs a/peak of
tensor time plus b/HBM of memory traffic (operands, activations, casts), so slowdown = a + b·x;
an FP4 group (twice the FP8 peak, the same HBM) lands above its FP8 sibling rather than at the
same share (too fast) or the same rate (too slow). With fewer than two distinct x it falls back
to the same GPU's achieved rate at another precision, else the median share of its precision,
else of all; never above the GEMM rate the GPU check measured (each said in the answer).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from orchestrator.explain.model import Params, Terms, exposed_dp, terms
from orchestrator.explain.published import DATA_FILE, Scale, gemm_rates, hbm_bandwidth, modelled, peak_of
from orchestrator.results.published import round_key

GLOBAL = ("elementwise_s", "tp_exposed", "tp_exposed_plain", "cp_exposed", "pp_exposed", "dp_exposed",
          "opt_s_per_gb", "attention_slowdown")
_BOUNDS = {"elementwise_s": (0.0, 100.0), "tp_exposed": (0.0, 1.0), "tp_exposed_plain": (0.0, 1.0), "cp_exposed": (0.0, 1.0),
           "pp_exposed": (0.0, 1.0), "dp_exposed": (0.0, 1.0), "opt_s_per_gb": (0.0, 10.0),
           "attention_slowdown": (1.0, 50.0),
           "other_s": (0.0, 5.0)}
_SLOW = (1.0, 50.0)
# What each shared parameter is, as `explain --params` names it (model.Params says the same).
MEANING = {
    "elementwise_s": "memory-bound seconds per 1e6 token x layer x hidden per TFLOP/s of peak",
    "tp_exposed": "share of TP traffic left exposed with TP_COMM_OVERLAP",
    "tp_exposed_plain": "share of TP traffic left exposed without TP_COMM_OVERLAP",
    "cp_exposed": "share of CP (ring attention) traffic left exposed",
    "pp_exposed": "share of PP send/receive traffic left exposed",
    "dp_exposed": "share of the DP chunk queue left exposed (at most 1: one chunk)",
    "opt_s_per_gb": "optimizer seconds per GB of state moved",
    "attention_slowdown": "1 / attention's achieved share of the BF16 dense peak",
}


@dataclass
class Fitted:
    """The fitted parameters, by name, with the data they came from."""

    slowdown: dict[tuple[str, str], float]
    shared: dict[str, float]
    scales: int
    systems: int
    source: str
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    overhead: dict[str, float] = field(default_factory=dict)  # round -> other_s (seconds)
    round_counts: dict[str, int] = field(default_factory=dict)

    def params_for(self, group: tuple[str, str], round_name: str | None = None) -> tuple[Params, str]:
        """The Params for a (GPU, precision) group on a round's software (None: the newest
        fitted round's) and where its slowdown came from."""
        if group in self.slowdown:
            slow, why = self.slowdown[group], f"fitted on {self.counts.get(group, 0)} scale(s) of {group[0]} {group[1]}"
        else:
            slow, why = self._prior(group)
        other, _ = self.overhead_for(round_name)
        return Params(slowdown=slow, other_s=other, **self.shared), why

    def overhead_for(self, round_name: str | None = None) -> tuple[float, str]:
        """The fixed per-step overhead of a round's software (other_s) and where it came from:
        fitted on that round's scales; None, the newest fitted round's; a round after every
        fitted one, the newest round's shrunk by its round-over-round ratio (at most 1; it has
        fallen every round: docs/explain.md); any other round, the nearest fitted round before it,
        else the first."""
        if not self.overhead:
            return 0.0, "no fitted round: no per-step overhead"
        rounds = sorted(self.overhead, key=round_key)
        newest = rounds[-1]
        if round_name in self.overhead:
            return self.overhead[round_name], f"fitted on {self.round_counts.get(round_name, 0)} scale(s) of {round_name}"
        if round_name is None or (len(rounds) < 2 and round_key(round_name) > round_key(newest)):
            return self.overhead[newest], f"the newest fitted round's ({newest})"
        if round_key(round_name) < round_key(newest):  # the nearest fitted round before, else the first
            before = [r for r in rounds if round_key(r) < round_key(round_name)] or rounds[:1]
            return self.overhead[before[-1]], f"the nearest fitted round's ({before[-1]})"
        last, prev = self.overhead[newest], self.overhead[rounds[-2]]
        ratio = min(1.0, last / prev) if prev > 0 else 1.0
        return last * ratio, (f"{round_name} not fitted: {newest}'s {last * 1e3:.0f} ms x its ratio to "
                              f"{rounds[-2]} ({ratio:.2f})")

    def _prior(self, group: tuple[str, str]) -> tuple[float, str]:
        """The slowdown of a group no scale was fitted on (the order in the module docstring)."""
        gpu, precision = group
        line, x = self.balance_line(), _balance(group)
        if line is not None and x is not None:
            slow = line[0] + line[1] * x
            why = (f"the balance line of the fitted groups, slowdown {line[0]:.3f} + {line[1]:.5f} x "
                   f"(peak / HBM = {x:.0f} TFLOP/s per TB/s)")
        else:
            slow, why = self._fallback(group)
        floor = _floor(group)
        if slow < floor:
            slow, why = floor, why + f", capped at the GPU check's GEMM rate ({1.0 / floor:.0%} of peak)"
        return slow, f"no fitted scale of {gpu} {precision}: {why}"

    def _fallback(self, group: tuple[str, str]) -> tuple[float, str]:
        """Without a balance line: the same GPU's achieved rate at another precision, else the
        median share of the precision's fitted groups, else of all."""
        gpu, precision = group
        here = peak_of(gpu, precision)
        other = sorted((p, v) for (g, p), v in self.slowdown.items() if g == gpu)
        if other and here:
            p, v = other[-1]
            peak = peak_of(gpu, p) or here
            return v * here / peak, f"{gpu} {p}'s achieved rate ({peak / v:.0f} TFLOP/s) at the {precision} peak"
        same = [v for (g, p), v in self.slowdown.items() if p == precision]
        slow = statistics.median(same or list(self.slowdown.values()) or [1.0])
        return slow, f"the median share of peak of the fitted {precision if same else 'all'} groups"

    def balance_line(self) -> tuple[float, float] | None:
        """(a, b) of slowdown = a + b·(peak / HBM) over the fitted groups, weighted by their
        scales; None with fewer than two distinct balances."""
        pts = [(x, v, self.counts.get(g, 1)) for g, v in self.slowdown.items()
               if (x := _balance(g)) is not None]
        if len({x for x, _, _ in pts}) < 2:
            return None
        w = np.sqrt(np.array([n for _, _, n in pts], dtype=float))
        a = np.array([[1.0, x] for x, _, _ in pts]) * w[:, None]
        sol, *_ = np.linalg.lstsq(a, np.array([v for _, v, _ in pts]) * w, rcond=None)
        return float(sol[0]), float(sol[1])

    def table(self) -> list[dict[str, object]]:
        """Every parameter, its value and its data, for `explain --params` and the docs."""
        rows: list[dict[str, object]] = [
            {"name": f"achieved share of dense peak [{g} {p}]", "value": round(1.0 / v, 4),
             "data": f"{self.counts.get((g, p), 0)} scale(s)"} for (g, p), v in sorted(self.slowdown.items())]
        rows += [{"name": f"{k}: {MEANING[k]}", "value": round(v, 6), "data": f"{self.scales} scales"}
                 for k, v in self.shared.items()]
        rows += [{"name": f"other_s: fixed per-step overhead of the round's software [{r}]", "value": round(v, 6),
                  "data": f"{self.round_counts.get(r, 0)} scale(s) of {r}"}
                 for r, v in sorted(self.overhead.items(), key=lambda kv: round_key(kv[0]))]
        line = self.balance_line()
        if line is not None:
            rows.append({"name": "balance line for a GPU or precision without scales: slowdown = a + b x peak/HBM",
                         "value": f"a {line[0]:.4f}, b {line[1]:.6f}",
                         "data": f"the {len(self.slowdown)} fitted groups, weighted by their scales"})
        rows += [{"name": f"bound: share of dense peak at most the measured GEMM rate [{g} {p}]",
                  "value": round(1.0 / _floor((g, p)), 4), "data": f"{rate:g} TFLOP/s, {where}"}
                 for (g, p), (rate, where) in sorted(gemm_rates().items()) if _floor((g, p)) > _SLOW[0]]
        return rows


def design(scales: Sequence[Scale], groups: list[tuple[str, str]], rounds: list[str],
           achieved: Callable[[Scale, Terms], float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The linear system: one row per scale, columns = groups' slowdowns, GLOBAL, then each
    round's per-step overhead. `achieved` gives a scale's achieved compute (seconds), which sets
    how much DP traffic the backward hides (model.exposed_dp); None: one chunk exposed."""
    a = np.zeros((len(scales), len(groups) + len(GLOBAL) + len(rounds)))
    y = np.zeros(len(scales))
    for i, s in enumerate(scales):
        assert s.config is not None and s.hardware is not None
        t = terms(s.config, s.hardware)
        a[i, groups.index(s.group)] = t.compute * (1.0 + t.bubble_fraction)
        j = len(groups)
        a[i, j] = t.elementwise * (1.0 + t.bubble_fraction)
        j += 1
        a[i, j + (0 if s.config.tp_overlap else 1)] = t.tp_raw
        a[i, j + 2], a[i, j + 3] = t.cp_raw, t.pp_raw
        a[i, j + 4] = exposed_dp(t, achieved(s, t) if achieved is not None else float("inf"))
        a[i, j + 5] = t.opt_bytes / 1e9
        a[i, j + 6] = t.attention * (1.0 + t.bubble_fraction)
        a[i, len(groups) + len(GLOBAL) + rounds.index(s.round)] = 1.0
        y[i] = s.step_s - t.dp_serial  # not overlapped: no parameter of its own to fit
    return a, y


FIT_ROUNDS = 6  # enough for the refit of its own predictions to settle (tests/test_explain.py)


def fit(scales: Sequence[Scale], source: str = "") -> Fitted:
    """Bounded least squares on relative error over `scales` (each must be modelled). The DP
    column depends on the achieved compute the fit sets, so it is solved again with the previous
    solution's compute (FIT_ROUNDS passes, the first with one chunk exposed)."""
    groups = sorted({s.group for s in scales})
    rounds = sorted({s.round for s in scales}, key=round_key)
    lo = np.array([_floor(g) for g in groups] + [_BOUNDS[k][0] for k in GLOBAL]
                  + [_BOUNDS["other_s"][0]] * len(rounds))
    hi = np.array([_SLOW[1]] * len(groups) + [_BOUNDS[k][1] for k in GLOBAL]
                  + [_BOUNDS["other_s"][1]] * len(rounds))
    theta: np.ndarray | None = None
    w = 1.0 / np.array([s.step_s for s in scales])  # relative to the measured step, not to y
    for _ in range(FIT_ROUNDS):
        a, y = design(scales, groups, rounds, None if theta is None else _achieved(theta, groups))
        theta = _bounded_lstsq(a * w[:, None], y * w, lo, hi)
    assert theta is not None
    counts = {g: sum(1 for s in scales if s.group == g) for g in groups}
    first = len(groups) + len(GLOBAL)
    return Fitted(slowdown={g: float(theta[i]) for i, g in enumerate(groups)},
                  shared={k: float(theta[len(groups) + j]) for j, k in enumerate(GLOBAL)},
                  scales=len(scales), systems=len({s.system_key for s in scales}),
                  source=source or f"recipes/{DATA_FILE}", counts=counts,
                  overhead={r: float(theta[first + k]) for k, r in enumerate(rounds)},
                  round_counts={r: sum(1 for s in scales if s.round == r) for r in rounds})


def _achieved(theta: np.ndarray, groups: list[tuple[str, str]]) -> Callable[[Scale, Terms], float]:
    """A scale's achieved compute under the solution `theta` (model.predict's compute)."""
    elementwise = float(theta[len(groups) + GLOBAL.index("elementwise_s")])

    def achieved(s: Scale, t: Terms) -> float:
        return (t.compute * float(theta[groups.index(s.group)]) + t.elementwise * elementwise
                + t.attention * float(theta[len(groups) + GLOBAL.index("attention_slowdown")]))
    return achieved


def _balance(group: tuple[str, str]) -> float | None:
    """A (GPU, precision)'s balance: dense peak (TFLOP/s) / HBM bandwidth (TB/s); None unknown."""
    peak = peak_of(*group)
    hbm = hbm_bandwidth().get(group[0])
    return peak / hbm[0] if peak and hbm else None


def _floor(group: tuple[str, str]) -> float:
    """The least slowdown of a group: 1 (the dense peak), or peak / the GEMM rate azbench's GPU
    check measured on that GPU at that precision, where one is stored."""
    rate = gemm_rates().get(group)
    peak = peak_of(*group) if rate else None
    return max(_SLOW[0], peak / rate[0]) if rate and peak else _SLOW[0]


def _bounded_lstsq(a: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   rounds: int = 200) -> np.ndarray:
    """min ‖a·θ − y‖ with lo ≤ θ ≤ hi: an active set (free variables solved exactly; a variable
    that leaves its bounds is pinned at the nearest; one whose gradient points inward is freed)."""
    n = a.shape[1]
    active = np.zeros(n, dtype=int)  # 0 free, -1 at lo, +1 at hi
    theta = np.clip(np.ones(n), lo, hi)
    used = np.abs(a).sum(axis=0) > 0
    active[~used] = -1
    theta[~used] = lo[~used]
    for _ in range(rounds):
        free = active == 0
        fixed = np.where(active < 0, lo, hi)
        theta = np.where(free, 0.0, fixed)
        rhs = y - a[:, ~free] @ theta[~free]
        if free.any():
            sol, *_ = np.linalg.lstsq(a[:, free], rhs, rcond=None)
            theta[free] = sol
        low, high = free & (theta < lo), free & (theta > hi)
        if low.any() or high.any():
            # pin the worst violator only, then re-solve
            over = np.where(low, lo - theta, np.where(high, theta - hi, 0.0))
            k = int(np.argmax(over))
            active[k] = -1 if low[k] else 1
            continue
        grad = a.T @ (a @ theta - y)
        release = (~free) & used & (((active < 0) & (grad < -1e-12)) | ((active > 0) & (grad > 1e-12)))
        if not release.any():
            break
        k = int(np.argmax(np.where(release, np.abs(grad), -1.0)))
        active[k] = 0
    return np.clip(theta, lo, hi)


@lru_cache(maxsize=1)
def fitted_params() -> Fitted:
    """The parameters fitted on every modelled published scale (recipes/published/step_times.csv)."""
    return fit(modelled())
