"""The model checked against published step times: leave-one-out (each scale predicted with its
own system's results out of the fit) and forward (each round predicted from earlier rounds).

A system is (round, submitter, system): every scale of it is held out together. A round with no
earlier round to fit on is not predicted forward (said in the count, never guessed).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.explain.fit import fit
from orchestrator.explain.model import predict
from orchestrator.explain.published import Scale, modelled
from orchestrator.results.published import round_key


@dataclass(frozen=True)
class Check:
    """One scale's prediction under a check, and how its compute rate was found."""

    scale: Scale
    predicted_s: float
    how: str

    @property
    def error(self) -> float:
        return (self.predicted_s - self.scale.step_s) / self.scale.step_s


def leave_one_out(scales: Sequence[Scale] | None = None) -> list[Check]:
    """Each scale predicted by a fit on every other system's scales."""
    pool = list(scales if scales is not None else modelled())
    out = []
    for key in sorted({s.system_key for s in pool}):
        fitted = fit([s for s in pool if s.system_key != key])
        for s in pool:
            if s.system_key == key:
                assert s.config is not None and s.hardware is not None
                params, how = fitted.params_for(s.group, s.round)
                out.append(Check(s, predict(s.config, s.hardware, params).step_s, how))
    return out


def forward(scales: Sequence[Scale] | None = None) -> tuple[list[Check], list[str]]:
    """Each round's scales predicted by a fit on earlier rounds only; the rounds not predicted."""
    pool = list(scales if scales is not None else modelled())
    rounds = sorted({s.round for s in pool}, key=round_key)
    out, skipped = [], []
    for r in rounds:
        earlier = [s for s in pool if round_key(s.round) < round_key(r)]
        if not earlier:
            skipped.append(r)
            continue
        fitted = fit(earlier)
        for s in pool:
            if s.round == r:
                assert s.config is not None and s.hardware is not None
                params, how = fitted.params_for(s.group, s.round)
                out.append(Check(s, predict(s.config, s.hardware, params).step_s, how))
    return out, skipped


def summary(checks: Sequence[Check]) -> tuple[int, float, float]:
    """(N, median |error|, p90 |error|) as fractions; p90 by the nearest-rank rule."""
    errs = sorted(abs(c.error) for c in checks)
    if not errs:
        return 0, float("nan"), float("nan")
    rank = max(1, -(-9 * len(errs) // 10))
    return len(errs), statistics.median(errs), errs[rank - 1]


def checks_document() -> dict[str, object]:
    """What recipes/published/step_model_checks.json holds: the leave-one-out and forward figures
    (fractions), overall and per benchmark; benchmarks/bench_explain.py writes it."""
    loo = leave_one_out()
    fwd, skipped = forward()

    def fig(checks: Sequence[Check]) -> dict[str, object]:
        n, med, p90 = summary(checks)
        return {"scales": n, "median": round(med, 4), "p90": round(p90, 4)}
    return {"leave_one_out": fig(loo), "forward": {**fig(fwd), "not_predicted_rounds": skipped},
            "by_benchmark": {b: fig([c for c in loo if c.scale.benchmark == b])
                             for b in sorted({c.scale.benchmark for c in loo})}}
